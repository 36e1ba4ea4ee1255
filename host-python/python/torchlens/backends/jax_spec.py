"""The JAX backend's spec. Kept apart from the adapter so the registry can list it without
importing jax."""

from __future__ import annotations

import importlib

from .contract import BackendSpec, FrameworkRequirement
from .torch_spec import _implementation


def _load():
    return importlib.import_module("torchlens.backends.jax").PROTOCOL


def _detect(model, inputs):
    from . import _root_module_detect

    return (
        _root_module_detect("jax", "jaxlib", "flax", "equinox")(model, inputs)
        or _module_root(model)
        or _jax_callable(model, inputs)
    )


def _module_root(model) -> bool:
    """An Equinox or Flax NNX module (a user subclass included), checked only when the caller
    has imported that library."""
    import sys

    eqx = sys.modules.get("equinox")
    nnx = sys.modules.get("flax.nnx")
    return (eqx is not None and isinstance(model, eqx.Module)) or (
        nnx is not None and isinstance(model, nnx.Module)
    )


def _jax_callable(model, inputs) -> bool:
    """A plain callable given jax arrays (and no other framework's)."""
    from . import _array_frameworks

    found: set = set()
    _array_frameworks(inputs, found)
    return callable(model) and found == {"jax"}


JAX_CAPABILITIES = {
    "select_by_function": True,
    "select_by_module": True,
    "save_selected": True,
    "source_lines": False,
    "draw": True,
    "validation_replay": True,
    "derived_grads": True,
    "save_value_dependent": False,
    "temporal_selectors": False,
    "intervene": False,
    "stop_after": False,
    "streaming": False,
    "save_grads": False,
    # Not built on any backend yet: both refuse with capability_unsupported.
    "sparse_recording": False,
    "edit_finished_trace": False,
}

JAX_SPEC = BackendSpec(
    name="jax",
    aliases=(),
    maturity="preview",
    requirement=FrameworkRequirement("jax", "0.4.30", "0.11", "0.10.2", "jax"),
    capabilities=JAX_CAPABILITIES,
    capability_implementations={
        name: _implementation(entry)
        for name, entry in (
            ("select_by_function", "torchlens.trace:Trace.select"),
            ("select_by_module", "torchlens.trace:Trace.select"),
            ("save_selected", "torchlens.backends.jax.backend:BACKEND.trace"),
            ("draw", "torchlens.trace:Trace.draw"),
            ("validation_replay", "torchlens.backends.jax.replay:validate"),
            ("derived_grads", "torchlens.backends.jax.grads:derive"),
        )
    },
    load=_load,
    detect=_detect,
)
