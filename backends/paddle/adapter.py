"""The Paddle adapter: the backend protocol for PaddlePaddle (dygraph)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, List

from . import refusals

# Paddle crashes when first imported after TensorFlow: refuse before importing it.
refusals.check_import_order()

import numpy as np  # noqa: E402
import paddle  # noqa: E402

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, Patches  # noqa: E402
from torchlens.adapter_kit.array_codec import is_bit_carrier  # noqa: E402
from torchlens.adapter_kit.replay import ReplayRecord, ReplayRuntime  # noqa: E402
from torchlens.errors import PayloadModifiedError  # noqa: E402

from .capture import Recorder, tensors_of  # noqa: E402
from .dtypes import neutral_name, paddle_dtype  # noqa: E402
from .grads import GradOptions, derive, floating  # noqa: E402


@dataclass
class PaddleRuntime(ReplayRuntime):
    """Runtime-only data of a live trace (never saved): what replay reads, plus the call that
    derived gradients run again."""

    model: Any = None
    args: tuple = ()
    kwargs: Any = None
    param_addresses: Any = None


class _VersionGuard:
    """Saved values are the model's own tensors; Paddle bumps a tensor's inplace version on
    every in-place write, so a value changed after the capture is refused instead of served."""

    __slots__ = ("versions",)

    def __init__(self, versions: dict) -> None:
        self.versions = versions

    def __call__(self, value_id: int, value: Any) -> None:
        expected = self.versions.get(value_id)
        if expected is not None and value._inplace_version() != expected:
            raise PayloadModifiedError(
                "this saved value was modified in place after the capture",
                "payload_modified_after_capture",
                "clone tensors returned by the model before changing them in place, or trace again",
            )


class PaddleAdapter(BackendProtocol):
    """Fills the backend protocol for PaddlePaddle dygraph."""

    refusal_codes = refusals.CODES
    array_type = paddle.Tensor
    patches_process_wide = True
    grad_options_type = GradOptions
    module_root_description = "a paddle.nn.Layer root"

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: CaptureRequest) -> Any:
        options = request.options
        grad_options = options.grad_options
        model = request.model
        refusals.root(model)
        mode = self.module_identity_mode(request)
        edits = None
        if request.interventions or request.stop_after is not None:
            from .edits import LiveEdits

            edits = LiveEdits(request, self)
        with CaptureSession(request) as session, Patches() as patches:
            recorder = Recorder(session, patches)
            versions = recorder.versions

            def hold(value_id: int, value: Any) -> Any:
                versions[value_id] = value._inplace_version()
                return value

            session.hold = hold
            if mode == "object_module":
                recorder.declare_layers(model)
            else:
                name = getattr(model, "__name__", type(model).__name__)
                session.module(0, ["self"], name, False, False)
                recorder.module_ids[id(model)] = 0
            session.extra("provenance.module_identity_mode", mode)
            session.extra("provenance.param_source", "module" if recorder.params else "none")
            for name, tensor in self.input_pairs(request.args, request.kwargs):
                recorder.input(name, tensor)
            if edits is not None:
                edits.attach(session, recorder)
            recorder.install(patches)
            stopped = False
            if mode == "object_module":
                try:
                    output = model(*request.args, **request.kwargs)
                except _stop_signal() as signal:
                    stopped, output = True, signal
            else:
                session.enter(0)
                try:
                    output = model(*request.args, **request.kwargs)
                except _stop_signal() as signal:
                    stopped, output = True, signal
                if not stopped:
                    output = recorder.exit(0, output)
            patches.restore_all()
            if stopped:
                edits.finish_stopped(session, output)
            else:
                for name, tensor in self.output_pairs(output):
                    value_id = recorder.known_id(tensor)
                    if value_id is None:
                        value_id = recorder.id_of(tensor)
                    session.output(name, value_id)
            if recorder.aliases:
                session.extra("provenance.paddle_aliases", str(recorder.aliases))
            runtime = PaddleRuntime(
                records=recorder.records,
                reference=self.reference_of(request),
                params=recorder.params,
                param_dtypes=recorder.param_dtypes,
                values=recorder.values,
                model=model,
                args=request.args,
                kwargs=request.kwargs,
            )
            if edits is not None:
                edits.prepare_runtime(runtime)
            trace = session.finish(self, runtime=runtime, payload_guard=_VersionGuard(versions))
        trace.options = dataclasses.replace(options, module_identity_mode=mode)
        if grad_options is not None:
            trace.autograd = derive(trace, grad_options)
        return trace

    def is_module_root(self, model: Any) -> bool:
        return isinstance(model, paddle.nn.Layer)

    def differentiable_input(self, value: Any) -> bool:
        return floating(value)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        with paddle.no_grad():
            return model(*args, **kwargs)

    def output_leaves(self, output: Any) -> List[Any]:
        return tensors_of(output)

    # ---- host copies ----------------------------------------------------------------------------

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host NumPy array of a Tensor; bfloat16 and float8 widen to float32."""
        if not isinstance(value, paddle.Tensor):
            return np.asarray(value)
        if neutral_name(value.dtype).startswith(("bfloat16", "float8")):
            value = value.astype("float32")
        return value.numpy()

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        if is_bit_carrier(dtype) and array.dtype.kind == "u":
            # Raw bits of a dtype NumPy lacks (bfloat16 travels as uint16): reinterpret them.
            bits = paddle.to_tensor(np.ascontiguousarray(array).view(np.int16))
            return bits.view(paddle_dtype(dtype))
        if dtype == "bfloat16":
            return paddle.to_tensor(np.asarray(array, dtype=np.float32)).astype("bfloat16")
        return paddle.to_tensor(np.array(array, dtype=np.dtype(dtype), order="C"))

    def apply_action(self, action: Any, value: Any) -> Any:
        """Zero-ablate, scale, add and replace-with computed natively on the tensor; a raw
        callable runs on the ``paddle.Tensor`` itself; other helpers compute on a host copy."""
        from .edits import apply_natively

        return apply_natively(self, action, value)

    # ---- payload codec ----------------------------------------------------------------------------

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order (bfloat16 as its raw bits)."""
        from torchlens.adapter_kit.array_codec import payload_bytes

        if neutral_name(value.dtype) == "bfloat16":
            return payload_bytes(value.view(paddle.int16).numpy().view(np.uint16))
        return payload_bytes(value.numpy())

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Any:
        """Every payload loads back as a ``paddle.Tensor``."""
        return {label: "value" for label in labels.values()}

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        with paddle.no_grad():
            result = record.call(*args, **kwargs)
        if record.output_index is None:
            return result
        return tensors_of(result)[record.output_index]


def _stop_signal() -> Any:
    from .edits import StopSignal

    return StopSignal
