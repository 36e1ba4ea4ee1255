"""The tinygrad adapter: the backend protocol for tinygrad."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, List

import numpy as np
from tinygrad import Tensor

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, Patches
from torchlens.adapter_kit.array_codec import is_bit_carrier
from torchlens.adapter_kit.replay import ReplayRecord, ReplayRuntime

from . import refusals
from .capture import Recorder, training_mode
from .dtypes import neutral_name, tinygrad_dtype
from .grads import GradOptions, derive, floating
from .modules import CallReporter, ModuleTree, discover, has_module_state


@dataclass
class TinygradRuntime(ReplayRuntime):
    """Runtime-only data of a live trace (never saved): what replay reads, plus the call that
    derived gradients run again."""

    model: Any = None
    args: tuple = ()
    kwargs: Any = None
    tree: Any = None
    input_ids: Any = None


class TinygradAdapter(BackendProtocol):
    """Fills the backend protocol for tinygrad."""

    refusal_codes = refusals.CODES
    array_type = Tensor
    patches_process_wide = True
    grad_options_type = GradOptions
    module_root_description = "a callable object holding tinygrad Tensors or tinygrad.nn layers"

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: CaptureRequest) -> Any:
        options = request.options
        grad_options = options.grad_options
        model = request.model
        refusals.check_root(model)
        mode = self.module_identity_mode(request)
        tree = discover(model) if mode == "object_module" else ModuleTree()
        realize = Tensor.realize
        with CaptureSession(request) as session:
            recorder = Recorder(session)
            recorder.snapshot()
            self._declare(session, recorder, model, tree, mode)
            input_ids = [
                recorder.input(name, tensor)
                for name, tensor in self.input_pairs(request.args, request.kwargs)
            ]
            reporter = CallReporter(tree, session, lambda output: self._ids(recorder, output))
            session.enter(0)
            with Patches() as patches:
                recorder.install(patches)
                reporter.install(patches)
                output = model(*request.args, **request.kwargs)
                outputs = [(name, recorder.value_id_of(tensor)) for name, tensor in self.output_pairs(output)]
            session.exit(0, [value_id for _, value_id in outputs if value_id is not None])
            for name, value_id in outputs:
                if value_id is not None:
                    session.output(name, value_id)
            # Realize-once: every recorded value in one evaluation, before any payload is read.
            recorder.realize_all(realize)
            runtime = TinygradRuntime(
                records=recorder.records,
                reference=self.reference_of(request),
                params=recorder.params,
                param_dtypes=recorder.param_dtypes,
                values=recorder.values,
                model=model,
                args=request.args,
                kwargs=request.kwargs,
                tree=tree,
                input_ids=input_ids,
            )
            trace = session.finish(self, runtime=runtime)
        trace.options = dataclasses.replace(options, module_identity_mode=mode)
        if grad_options is not None:
            trace.autograd = derive(trace, grad_options)
        return trace

    def _declare(self, session: Any, recorder: Recorder, model: Any, tree: ModuleTree, mode: str) -> None:
        name = type(model).__name__ if mode == "object_module" else getattr(model, "__name__", "function")
        session.module(0, ["self"], name, False, training_mode())
        for record in tree.modules[1:]:
            session.module(record.module_id, record.addresses, record.class_name, record.container, False)
        session.extra("provenance.module_identity_mode", mode)
        session.extra("provenance.param_source", "module" if tree.params else "none")
        for address, owner, tensor, _trainable in tree.params:
            recorder.param(address, owner, tensor)

    def _ids(self, recorder: Recorder, output: Any) -> List[int]:
        ids = []
        for _, tensor in self.output_pairs(output):
            value_id = recorder.known.get(tensor.uop)
            if value_id is not None:
                ids.append(value_id)
        return ids

    def is_module_root(self, model: Any) -> bool:
        return has_module_state(model)

    def differentiable_input(self, value: Any) -> bool:
        return floating(value)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        return model(*args, **kwargs)

    def output_leaves(self, output: Any) -> List[Any]:
        return [tensor for _, tensor in self.output_pairs(output)]

    def realize(self, values: List[Any]) -> List[Any]:
        """Realizes lazy Tensors in one evaluation."""
        tensors = [value for value in values if isinstance(value, Tensor)]
        if tensors:
            Tensor.realize(tensors[0], *tensors[1:])
        return values

    # ---- host copies ----------------------------------------------------------------------------

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host NumPy array of a Tensor (realizing it if needed); bfloat16 widens to float32."""
        if not isinstance(value, Tensor):
            return np.asarray(value)
        if neutral_name(value.dtype) == "bfloat16":
            from tinygrad import dtypes

            value = value.cast(dtypes.float32)
        return value.numpy()

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        if is_bit_carrier(dtype) and array.dtype.kind == "u":
            # Raw bits of a dtype NumPy lacks natively (bfloat16 travels as uint16).
            return Tensor(np.ascontiguousarray(array)).bitcast(tinygrad_dtype(dtype))
        if dtype == "bfloat16":
            return Tensor(np.asarray(array, dtype=np.float32)).cast(tinygrad_dtype(dtype))
        return Tensor(np.array(array, dtype=np.dtype(dtype), order="C"))

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order (bfloat16 as its raw bits)."""
        from torchlens.adapter_kit.array_codec import payload_bytes

        if neutral_name(value.dtype) == "bfloat16":
            from tinygrad import dtypes

            return payload_bytes(value.bitcast(dtypes.uint16).numpy())
        return payload_bytes(value.numpy())

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Any:
        """Every payload loads back as a tinygrad Tensor."""
        return {label: "value" for label in labels.values()}

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        return record.call(*args, **kwargs)
