"""The JAX backend's declaration: read by the registry without importing jax."""

from __future__ import annotations

import sys
from typing import Any

from ..spec import (
    BackendSpec,
    FrameworkRequirement,
    detect_by_type_module,
    implemented_by,
    package_capabilities,
    package_implementations,
)

_owned_by_jax_libraries = detect_by_type_module("jax", "jaxlib", "flax", "equinox")


def _detect(model: Any, inputs: Any) -> bool:
    """A model from jax, flax or equinox, or an Equinox or Flax NNX module (a user subclass
    included, checked only when the caller imported that library). A plain callable given jax
    arrays is routed by the registry's shared rule."""
    if _owned_by_jax_libraries(model, inputs):
        return True
    eqx = sys.modules.get("equinox")
    nnx = sys.modules.get("flax.nnx")
    return (eqx is not None and isinstance(model, eqx.Module)) or (
        nnx is not None and isinstance(model, nnx.Module)
    )


SPEC = BackendSpec(
    name="jax",
    aliases=(),
    maturity="preview",
    requirement=FrameworkRequirement("jax", "0.7.1", "0.11", "0.10.2", "jax"),
    array_modules=("jax", "jaxlib"),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(save_selected=True, derived_grads=True),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("torchlens.backends.jax.adapter:JaxAdapter.capture"),
        "derived_grads": implemented_by("torchlens.backends.jax.grads:derive"),
    },
    option_values={
        "module_identity_mode": ("function_root", "pytree_module"),
        "payload_policy": ("array_payloads",),
    },
    adapter="torchlens.backends.jax.adapter:JaxAdapter",
    example="torchlens.backends.jax.example:example",
    detect=_detect,
)
