"""The torch backend's declaration: read by the registry without importing torch."""

from __future__ import annotations

import sys
from typing import Any

from ..spec import (
    BackendSpec,
    FrameworkRequirement,
    implemented_by,
    package_capabilities,
    package_implementations,
)


def _detect(model: Any, inputs: Any) -> bool:
    """A torch module (only when torch is imported; a callable given torch tensors is routed by
    the registry's shared rule)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


SPEC = BackendSpec(
    name="torch",
    aliases=("pytorch",),
    maturity="preview",
    requirement=FrameworkRequirement("torch", "2.10", "3.0", "2.15.0", "torch"),
    array_modules=("torch",),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(
        save_selected=True,
        source_lines=True,
        intervene=True,
        stop_after=True,
        save_value_dependent=True,
        temporal_selectors=True,
        edit_finished_trace=True,
        sparse_recording=True,
        save_grads=True,
        backward_ready=True,
        derived_grads=True,
        streaming=True,
    ),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("torchlens.backends.torch.adapter:TorchAdapter.capture"),
        "source_lines": implemented_by("torchlens.backends.torch.adapter:TorchAdapter.capture"),
        "intervene": implemented_by("torchlens.adapter_kit.live_edits:LiveEdits"),
        "stop_after": implemented_by("torchlens.adapter_kit.live_edits:LiveEdits"),
        "save_value_dependent": implemented_by("torchlens.adapter_kit.live_edits:LiveEdits"),
        "temporal_selectors": implemented_by("torchlens.adapter_kit.live_plan:LivePlan"),
        "edit_finished_trace": implemented_by("torchlens.edits.fork:ForkedTrace"),
        "sparse_recording": implemented_by("torchlens.backends.torch.recording:record"),
        "save_grads": implemented_by("torchlens.backends.torch.backward:BackwardArming"),
        "backward_ready": implemented_by("torchlens.backends.torch.backward:BackwardArming"),
        "derived_grads": implemented_by("torchlens.backends.torch.grads:derive"),
        "streaming": implemented_by("torchlens.adapter_kit.streaming:PayloadSpool"),
    },
    # No option_values: the options the preview backends read (module_identity_mode,
    # payload_policy, jax_*) are inert inputs on torch, as the spec says, whatever their value.
    adapter="torchlens.backends.torch.adapter:TorchAdapter",
    example="torchlens.backends.torch.example:example",
    detect=_detect,
)
