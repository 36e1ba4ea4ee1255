"""Live edits on Paddle: edit actions applied natively on ``paddle.Tensor``, and the
``intervene=`` / ``stop_after=`` rules decided as each concrete output leaves its wrapper."""

from __future__ import annotations

from typing import Any

import numpy
import paddle

from torchlens.adapter_kit.live_edits import LiveEdits as KitLiveEdits
from torchlens.adapter_kit.live_edits import StopSignal
from torchlens.edits.actions import Add, CallableAction, ReplaceWith, Scale, ZeroAblate, _shape_kept

from . import refusals
from .capture import tensors_of

__all__ = ["LiveEdits", "StopSignal", "apply_natively"]


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
    elif isinstance(action, CallableAction):
        return action.apply(value, adapter)
    else:
        return action.apply(value, adapter)
    _shape_kept(action.describe(), value, result)
    return result


def _numpy(value: Any, dtype: Any) -> Any:
    return numpy.ascontiguousarray(numpy.asarray(value, dtype=dtype))


# ---- live edits and early stop -------------------------------------------------------------------

#: Actions with a native Paddle implementation (plus raw callables on ``paddle.Tensor``).
_NATIVE_ACTIONS = (ZeroAblate, Scale, Add, ReplaceWith, CallableAction)


def _refuse(message: str, code: str, remedy: str) -> Exception:
    return refusals.refuse(message, code, remedy)


class LiveEdits(KitLiveEdits):
    """``intervene=`` and ``stop_after=`` on a Paddle capture (the kit's live edits): the
    recorder's wrappers hand each concrete output to :meth:`on_output` before the caller sees
    it, and each layer call's outputs to :meth:`on_exit`."""

    def __init__(self, request: Any, adapter: Any) -> None:
        super().__init__(request, adapter, _refuse, supported_actions=_NATIVE_ACTIONS, framework="Paddle")

    def attach(self, session: Any, recorder: Any) -> None:
        super().attach(session, recorder)
        recorder.on_output = self.on_output
        recorder.on_exit = self.on_exit

    def finish_stopped(self, session: Any, signal: Any) -> None:
        """The forward ended at the frontier: there are no outputs to report."""

    def prepare_runtime(self, runtime: Any) -> None:  # type: ignore[override]
        super().prepare_runtime(runtime, apply_natively, _output_of)


def _output_of(result: Any, output_index: Any) -> Any:
    return tensors_of(result)[output_index] if output_index is not None else result
