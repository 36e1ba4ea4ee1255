"""The NumPy test adapter's declaration (read through the ``torchlens.backends`` entry point)."""

from __future__ import annotations

from typing import Any

from torchlens.backends import BackendSpec, FrameworkRequirement
from torchlens.backends.spec import implemented_by, package_capabilities, package_implementations


def _detect(model: Any, inputs: Any) -> bool:
    from .model import Module

    return isinstance(model, Module)


SPEC = BackendSpec(
    name="numpy",
    aliases=("np",),
    maturity="preview",
    requirement=FrameworkRequirement("numpy", "1.24", "3.0", "2.4.6", "numpy"),
    # NumPy arrays are every framework's host arrays (JAX takes them as inputs): this adapter
    # does not claim them for routing; it takes the models that are its own Modules.
    array_modules=(),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(save_selected=True),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("numpy_adapter.adapter:NumpyAdapter.capture"),
    },
    option_values={"module_identity_mode": ("object_module",), "payload_policy": ("array_payloads",)},
    adapter="numpy_adapter.adapter:NumpyAdapter",
    example="numpy_adapter.example:example",
    detect=_detect,
)
