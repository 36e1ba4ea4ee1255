"""The NumPy test adapter: wraps a small inventory of NumPy functions and ``Module.__call__`` for
the duration of a capture (through the kit's :class:`Patches`), reports every call to the shared
:class:`CaptureSession`, and replays through the shared driver. Arrays it did not see created
(module-level globals) are reported by id without a declaration, so the core inserts a constant
op for them: the case that broke adapters which guessed the core's op numbering."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy

from torchlens.adapter_kit import BackendProtocol, CaptureSession, Patches
from torchlens.adapter_kit.array_codec import is_bit_carrier
from torchlens.adapter_kit.replay import ParamRef, ReplayRecord, ReplayRuntime, ValueRef, argument_template

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


class _Capture:
    """One capture's state: ids of the arrays seen (arrays carry no attributes, so by ``id``,
    each kept alive until the capture ends so an id is never reused)."""

    def __init__(self, session: CaptureSession) -> None:
        self.session = session
        self.ids: Dict[int, int] = {}
        self.alive: List[Any] = []
        self.params: Dict[int, Any] = {}
        self.param_dtypes: Dict[int, str] = {}
        self.module_ids: Dict[int, int] = {}
        self.records: Dict[int, ReplayRecord] = {}
        self.depth = 0

    def _name(self, array: Any) -> int:
        value_id = self.session.new_value_id()
        self.ids[id(array)] = value_id
        self.alive.append(array)
        return value_id

    def declare(self, model: Any, args: tuple) -> None:
        session = self.session
        if isinstance(model, Module):
            for index, (address, module) in enumerate(model.named_modules()):
                self.module_ids[id(module)] = index
                session.module(index, [address], type(module).__name__, False, False)
                prefix = "" if address == "self" else address + "."
                for name, array in module.named_parameters():
                    value_id = self._name(array)
                    self.params[value_id] = array
                    self.param_dtypes[value_id] = array.dtype.name
                    session.param(value_id, prefix + name, index, array.shape, array.dtype.name, True)
        else:
            session.module(0, ["self"], type(model).__name__, False, False)
        for position, array in enumerate(args):
            if isinstance(array, numpy.ndarray):
                value_id = self._name(array)
                session.input(f"args.{position}", value_id, array, array.shape, array.dtype.name)

    def reference(self, array: Any) -> Tuple[int, ValueRef]:
        value_id = self.ids.get(id(array))
        if value_id is None:
            # Never declared: the core turns the read into a constant op of its own.
            value_id = self._name(array)
        return value_id, ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    def wrap_function(self, name: str):
        def make(original):
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if self.depth:
                    return original(*args, **kwargs)
                self.depth += 1
                try:
                    out = original(*args, **kwargs)
                finally:
                    self.depth -= 1
                if isinstance(out, numpy.generic):
                    out = numpy.asarray(out)
                if isinstance(out, numpy.ndarray):
                    self.record(name, original, args, kwargs, out)
                return out

            return wrapped

        return make

    def record(self, name: str, function: Any, args: tuple, kwargs: dict, out: Any) -> None:
        parents, template, keywords = argument_template(args, kwargs, numpy.ndarray, self.reference)
        value_id = self._name(out)
        self.records[value_id] = ReplayRecord(function, name, template, keywords)
        self.session.op(name, parents, [(value_id, out, out.shape, out.dtype.name)])

    def wrap_module_call(self, original):
        def call(module: Any, *args: Any, **kwargs: Any) -> Any:
            module_id = self.module_ids.get(id(module))
            if module_id is None:
                return original(module, *args, **kwargs)
            self.session.enter(module_id)
            out = original(module, *args, **kwargs)
            outputs = out if isinstance(out, (tuple, list)) else (out,)
            self.session.exit(module_id, [self.ids[id(item)] for item in outputs if id(item) in self.ids])
            return out

        return call


class NumpyAdapter(BackendProtocol):
    """The backend protocol over NumPy."""

    refusal_codes = ()

    def capture(self, request: Any) -> Any:
        model, args, kwargs = request.model, request.args, request.kwargs
        with CaptureSession(request) as session, Patches() as patches:
            capture = _Capture(session)
            capture.declare(model, args)
            for name in WRAPPED:
                patches.wrap(numpy, name, capture.wrap_function(name))
            patches.wrap(Module, "__call__", capture.wrap_module_call)
            if not isinstance(model, Module):
                session.enter(0)
            output = model(*args, **kwargs)
            leaves = self.output_leaves(output)
            if not isinstance(model, Module):
                session.exit(0, [capture.ids[id(leaf)] for leaf in leaves if id(leaf) in capture.ids])
            for index, leaf in enumerate(leaves):
                session.output(f"output.{index}" if len(leaves) > 1 else "output", capture.reference(leaf)[0])
            runtime = ReplayRuntime(
                records=capture.records,
                reference=self.reference_of(request),
                params=capture.params,
                param_dtypes=capture.param_dtypes,
            )
            return session.finish(self, runtime=runtime)

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
