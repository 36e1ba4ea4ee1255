"""The torch backend's declaration: read by the registry without importing torch."""

from __future__ import annotations

import sys
from typing import Any

from ..registry import array_frameworks
from ..spec import (
    BackendSpec,
    FrameworkRequirement,
    implemented_by,
    package_capabilities,
    package_implementations,
)


def _detect(model: Any, inputs: Any) -> bool:
    """A torch module, or a callable given torch tensors (only when torch is imported)."""
    if "torch" not in sys.modules:
        return False
    import torch

    if isinstance(model, torch.nn.Module):
        return True
    return callable(model) and array_frameworks(inputs) == {"torch"}


SPEC = BackendSpec(
    name="torch",
    aliases=("pytorch",),
    maturity="preview",
    requirement=FrameworkRequirement("torch", "2.0", "3.0", "2.15.0", "torch"),
    array_modules=("torch",),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(save_selected=True, source_lines=True),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("torchlens.backends.torch.adapter:TorchAdapter.capture"),
        "source_lines": implemented_by("torchlens.backends.torch.adapter:TorchAdapter.capture"),
    },
    option_values={
        # Torch modules always use object_module attribution; the JAX options are inert here.
        "module_identity_mode": ("object_module",),
        "payload_policy": ("array_payloads",),
    },
    adapter="torchlens.backends.torch.adapter:TorchAdapter",
    example="torchlens.backends.torch.example:example",
    detect=_detect,
)
