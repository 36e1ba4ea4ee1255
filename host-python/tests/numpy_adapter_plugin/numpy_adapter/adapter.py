"""The NumPy test adapter: wraps a small inventory of NumPy functions and ``Module.__call__`` for
the duration of a capture (through the kit's :class:`Patches`), reports every call to the shared
:class:`CaptureSession`, and replays through the shared driver. Arrays it did not see created
(module-level globals) are reported by id without a declaration, so the core inserts a constant
op for them: the case that broke adapters which guessed the core's op numbering."""

from __future__ import annotations

from typing import Any, Iterator, List, Tuple

import numpy

from torchlens.adapter_kit import BackendProtocol
from torchlens.adapter_kit.array_codec import is_bit_carrier
from torchlens.adapter_kit.capture_pipeline import CaptureHooks
from torchlens.adapter_kit.recorder import Recorder
from torchlens.adapter_kit.replay import ReplayRecord, argument_template

from .model import Module

#: The NumPy functions a capture records.
WRAPPED = (
    "matmul",
    "add",
    "subtract",
    "multiply",
    "tanh",
    "maximum",
    "exp",
    "sum",
    "mean",
    "concatenate",
    "reshape",
)


class NumpyRecorder(Recorder):
    """The kit's recorder over NumPy arrays (identified by object: arrays carry no attributes)."""

    array_type = numpy.ndarray

    def dtype_of(self, value: Any) -> str:
        return value.dtype.name

    def module_children(self, module: Any) -> Iterator[Tuple[str, Any]]:
        return ((name, value) for name, value in vars(module).items() if isinstance(value, Module))

    def owned_params(self, module: Any) -> Iterator[Tuple[str, Any]]:
        return module.named_parameters()

    def declare_outside(self, array: Any) -> int:
        # Deliberately left undeclared: the core turns the read into a constant op of its own
        # (the case that broke adapters which guessed the core's op numbering).
        return self.tag(array)

    def record(self, func: str, call: Any, args: tuple, kwargs: dict, out: Any) -> Any:
        if isinstance(out, numpy.generic):
            out = numpy.asarray(out)
        if not isinstance(out, numpy.ndarray):
            return out
        parents, template, keywords = argument_template(args, kwargs, numpy.ndarray, self.reference)
        value_id = self.tag(out)
        self.values[value_id] = out
        self.records[value_id] = ReplayRecord(call, func, template, keywords)
        outputs = [(value_id, out, out.shape, out.dtype.name)]
        self.session.op(func, parents, outputs)
        return self.edited_outputs(func, out, outputs)


class NumpyCapture(CaptureHooks):
    """The NumPy side of the kit's capture pipeline: the wrapped functions and module calls."""

    def make_recorder(self) -> NumpyRecorder:
        return NumpyRecorder(self.session)

    def install(self) -> None:
        recorder, patches = self.recorder, self.patches
        for name in WRAPPED:
            patches.wrap(numpy, name, recorder.op_wrapper(name))
        patches.wrap(Module, "__call__", recorder.module_call_wrapper)

    def root_call_reported(self) -> bool:
        return self.mode == "object_module"  # Module.__call__ reports the root's call


class NumpyAdapter(BackendProtocol):
    """The backend protocol over NumPy."""

    array_type = numpy.ndarray
    capture_hooks = NumpyCapture

    def is_module_root(self, model: Any) -> bool:
        return isinstance(model, Module)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        return model(*args, **kwargs)

    def output_leaves(self, output: Any) -> List[Any]:
        if isinstance(output, (tuple, list)):
            return [leaf for item in output for leaf in self.output_leaves(item)]
        return [output] if isinstance(output, numpy.ndarray) else []

    def to_numpy(self, value: Any) -> Any:
        return numpy.asarray(value)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        if is_bit_carrier(dtype):
            raise TypeError(f"NumPy has no native {dtype}")
        return numpy.asarray(array).astype(dtype, copy=False)

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        return numpy.asarray(record.call(*args, **kwargs))

    def replay_argument(self, value: Any) -> Any:
        return numpy.array(value, copy=True)
