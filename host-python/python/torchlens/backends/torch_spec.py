"""The torch backend's spec. Kept apart from the adapter so the registry can list it without
importing torch."""

from __future__ import annotations

import importlib

from .contract import BackendSpec, FrameworkRequirement


def _load():
    return importlib.import_module("torchlens.backends.torch").PROTOCOL


def _detect(model, inputs):
    from . import _torch_detect

    return _torch_detect(model, inputs)


def _implementation(path: str):
    """A capability's implementation (``module:attribute``), resolved when first used so the
    registry does not import torch."""
    module_name, attribute = path.split(":")

    def implementation(*args, **kwargs):
        target = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        return target(*args, **kwargs)

    implementation.__name__ = attribute
    return implementation


TORCH_CAPABILITIES = {
    "select_by_function": True,
    "select_by_module": True,
    "save_selected": True,
    "source_lines": True,
    "draw": True,
    "validation_replay": True,
    "save_value_dependent": False,
    "temporal_selectors": False,
    "intervene": False,
    "stop_after": False,
    "streaming": False,
    "save_grads": False,
    "derived_grads": False,
    # Not built on any backend yet: both refuse with capability_unsupported.
    "sparse_recording": False,
    "edit_finished_trace": False,
}

TORCH_SPEC = BackendSpec(
    name="torch",
    aliases=("pytorch",),
    maturity="stable",
    requirement=FrameworkRequirement("torch", "2.0", "3.0", "2.15.0", "torch"),
    capabilities=TORCH_CAPABILITIES,
    capability_implementations={
        name: _implementation(entry)
        for name, entry in (
            ("select_by_function", "torchlens.trace:Trace.select"),
            ("select_by_module", "torchlens.trace:Trace.select"),
            ("save_selected", "torchlens.backends.torch.backend:BACKEND.trace"),
            ("source_lines", "torchlens.backends.torch.backend:BACKEND.trace"),
            ("draw", "torchlens.trace:Trace.draw"),
            ("validation_replay", "torchlens.backends.torch.replay:validate"),
        )
    },
    load=_load,
    detect=_detect,
)
