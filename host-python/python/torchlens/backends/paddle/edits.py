"""Live edits on Paddle: applying edit actions natively on ``paddle.Tensor``."""

from __future__ import annotations

from typing import Any

import paddle

from torchlens.edits.actions import Add, CallableAction, ReplaceWith, Scale, ZeroAblate, _shape_kept


class StopSignal(BaseException):
    """Raised inside the forward at the ``stop_after=`` frontier, so nothing past it runs."""


def apply_natively(adapter: Any, action: Any, value: Any) -> Any:
    """The replacement of ``value`` under ``action``, as a tensor of the same shape and dtype."""
    if isinstance(action, ZeroAblate):
        result = paddle.zeros_like(value)
    elif isinstance(action, Scale):
        result = (value * action.factor).astype(value.dtype)
    elif isinstance(action, Add):
        delta = action.delta
        if not isinstance(delta, (int, float, paddle.Tensor)):
            delta = adapter.from_numpy(_numpy(delta, adapter.to_numpy(value).dtype), adapter.neutral_dtype(value))
        result = (value + delta).astype(value.dtype)
    elif isinstance(action, ReplaceWith):
        replacement = action.value() if callable(action.value) else action.value
        if not isinstance(replacement, paddle.Tensor):
            array = _numpy(replacement, adapter.to_numpy(value).dtype)
            replacement = adapter.from_numpy(array, str(array.dtype))
        result = paddle.broadcast_to(replacement, value.shape).astype(value.dtype)
    elif isinstance(action, CallableAction):
        return action.apply(value, adapter)
    else:
        return action.apply(value, adapter)
    _shape_kept(action.describe(), value, result)
    return result


def _numpy(value: Any, dtype: Any) -> Any:
    import numpy

    return numpy.ascontiguousarray(numpy.asarray(value, dtype=dtype))
