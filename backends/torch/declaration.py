"""The torch backend's declaration: read by the registry without importing torch."""

from __future__ import annotations

from ..spec import FrameworkRequirement, built_backend, detect_instances

_LIVE_EDITS = "torchlens.adapter_kit.live_edits:LiveEdits"
_BACKWARD = "torchlens.backends.torch.backward:BackwardArming"

SPEC = built_backend(
    "torch",
    aliases=("pytorch",),
    requirement=FrameworkRequirement("torch", "2.10", "3.0", "2.15.0", "torch"),
    array_modules=("torch",),
    implemented={
        "save_selected": "torchlens.backends.torch.adapter:TorchAdapter.capture",
        "source_lines": "torchlens.backends.torch.adapter:TorchAdapter.capture",
        "intervene": _LIVE_EDITS,
        "stop_after": _LIVE_EDITS,
        "save_value_dependent": _LIVE_EDITS,
        "temporal_selectors": "torchlens.adapter_kit.live_plan:LivePlan",
        "edit_finished_trace": "torchlens.edits.fork:ForkedTrace",
        "sparse_recording": "torchlens.backends.torch.recording:record",
        "save_grads": _BACKWARD,
        "backward_ready": _BACKWARD,
        "derived_grads": "torchlens.backends.torch.grads:derive",
        "streaming": "torchlens.adapter_kit.streaming:PayloadSpool",
    },
    # No option_values: the options the preview backends read (module_identity_mode,
    # payload_policy, jax_*) are inert inputs on torch, as the spec says, whatever their value.
    adapter="torchlens.backends.torch.adapter:TorchAdapter",
    example="torchlens.backends.torch.example:example",
    # A torch module (only when torch is imported). A callable given torch tensors is routed by
    # the registry's shared rule.
    detect=detect_instances("torch:nn.Module"),
)
