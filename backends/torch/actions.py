"""Edit actions computed natively on ``torch.Tensor`` (same device, no host copy)."""

from __future__ import annotations

from typing import Any

import torch

from torchlens.edits.actions import (
    Add,
    Clamp,
    MeanAblate,
    ReplaceWith,
    Scale,
    ZeroAblate,
    _shape_kept,
)


def _tensor(value: Any, like: torch.Tensor) -> torch.Tensor:
    """``value`` (a number, an array, a tensor) as a tensor on ``like``'s device."""
    if isinstance(value, torch.Tensor):
        return value.to(device=like.device)
    return torch.as_tensor(value, device=like.device)


def apply_natively(adapter: Any, action: Any, value: torch.Tensor) -> torch.Tensor:
    """The replacement of ``value`` under ``action``, same shape and dtype; an action with no
    torch form (a raw callable, one bound to its context) applies itself."""
    if isinstance(action, ZeroAblate):
        result = torch.zeros_like(value)
    elif isinstance(action, Scale):
        result = value * action.factor
    elif isinstance(action, Add):
        result = value + _tensor(action.delta, value)
    elif isinstance(action, Clamp):
        result = torch.clamp(value, min=action.min, max=action.max)
    elif isinstance(action, MeanAblate):
        if action.source is not None:
            mean = _tensor(action.source, value).float().mean()
            result = torch.full_like(value, mean.item())
        elif action.dim is None:
            result = torch.full_like(value, value.float().mean().item())
        else:
            result = value.float().mean(dim=action.dim, keepdim=True).expand(value.shape)
    elif isinstance(action, ReplaceWith):
        replacement = action.value() if callable(action.value) else action.value
        result = torch.broadcast_to(_tensor(replacement, value), value.shape)
    else:
        return action.apply(value, adapter)
    _shape_kept(action.describe(), value, result)
    return result.to(value.dtype).contiguous() if result.dtype != value.dtype else result.contiguous()
