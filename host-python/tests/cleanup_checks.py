"""What the tests check after a capture: nothing TorchLens installed is left behind."""

from __future__ import annotations

import torch
import torch.nn.modules.module as module_globals


def nothing_installed(model, x) -> None:
    """No function mode, no global module hook, no capture id on the model's or input's tensors."""
    assert not torch._C._is_torch_function_mode_enabled()
    assert len(module_globals._global_forward_hooks) == 0
    assert len(module_globals._global_forward_pre_hooks) == 0
    for tensor in list(model.parameters()) + [x]:
        assert not hasattr(tensor, "_torchlens_id")
