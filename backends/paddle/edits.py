"""Live edits on Paddle: edit actions applied natively on ``paddle.Tensor``, and the
``intervene=`` / ``stop_after=`` rules decided as each concrete output leaves its wrapper."""

from __future__ import annotations

import functools
from typing import Any

import numpy
import paddle

from torchlens.adapter_kit.live_edits import LiveEdits as KitLiveEdits
from torchlens.edits.actions import Add, CallableAction, ReplaceWith, Scale, ZeroAblate, _shape_kept

__all__ = ["LiveEdits", "apply_natively"]


def apply_natively(adapter: Any, action: Any, value: Any) -> Any:
    """The replacement of ``value`` under ``action``, as a tensor of the same shape and dtype."""
    if isinstance(action, ZeroAblate):
        result = paddle.zeros_like(value)
    elif isinstance(action, Scale):
        result = (value * action.factor).astype(value.dtype)
    elif isinstance(action, Add):
        delta = action.delta
        if not isinstance(delta, (int, float, paddle.Tensor)):
            delta = adapter.from_numpy(
                _numpy(delta, adapter.to_numpy(value).dtype), adapter.neutral_dtype(value)
            )
        result = (value + delta).astype(value.dtype)
    elif isinstance(action, ReplaceWith):
        replacement = action.value() if callable(action.value) else action.value
        if not isinstance(replacement, paddle.Tensor):
            array = _numpy(replacement, adapter.to_numpy(value).dtype)
            replacement = adapter.from_numpy(array, str(array.dtype))
        result = paddle.broadcast_to(replacement, value.shape).astype(value.dtype)
    else:  # a raw callable on the framework's tensor, or a helper computed on a host copy
        return action.apply(value, adapter)
    _shape_kept(action.describe(), value, result)
    return result


def _numpy(value: Any, dtype: Any) -> Any:
    return numpy.ascontiguousarray(numpy.asarray(value, dtype=dtype))


# ---- live edits and early stop -------------------------------------------------------------------

#: ``intervene=`` and ``stop_after=`` on a Paddle capture: the kit's live edits, decided as each
#: concrete output leaves its wrapper, with the actions Paddle applies natively (plus raw
#: callables on ``paddle.Tensor``).
LiveEdits = functools.partial(
    KitLiveEdits, supported_actions=(ZeroAblate, Scale, Add, ReplaceWith, CallableAction), framework="Paddle"
)
