"""The FuncGraph static importer: graph-only entries (a ``tf.function`` root, a concrete function
such as a SavedModel signature, a Keras model whose ``call`` is a ``tf.function``). The entry's
concrete function is traced for the given inputs; its graph is compiled once onto the kit's slot
program (:mod:`torchlens.adapter_kit.graph_program`: pruned to the ops the outputs depend on,
nested calls inlined) and kept while the concrete function lives. Concrete values come from
running each pure op eagerly through ``tf.raw_ops`` on its inputs' values (placeholders are the
call's inputs and the function's captures); the branch an ``If`` takes (its predicate's value)
is walked in place; a ``While`` or ``Case`` is one control-flow region (its body is not walked
for values) and a stateful op (or one whose inputs have no value) an opaque region, recorded
without a value and replayed as unverified. There is no module attribution (``function_root``),
and ``recurrence_detection`` is False (graph node names are one-shot sites)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import tensorflow as tf
from tensorflow.python.framework import function_def_to_graph, tensor_util

from torchlens.adapter_kit.graph_import import GraphImport
from torchlens.adapter_kit.graph_program import GraphReader, compile_graph
from torchlens.adapter_kit.program_cache import Entry, ProgramCache
from torchlens.adapter_kit.program_capture import GraphEntryCall, GraphOnlyCaptureHooks
from torchlens.adapter_kit.program_import import Pair
from torchlens.adapter_kit.replay import replay_coverage

from . import prescan, refusals
from .capture import op_name, raw_op_call
from .dtypes import DENSE, KEPT, neutral_name
from .refusals import keras_predict_owner

#: Function-call op types whose callee is inlined.
_CALLS = {"StatefulPartitionedCall", "PartitionedCall"}

#: Op types that only pass control or structure (not recorded).
_SKIPPED = {"NoOp", "Placeholder"}

#: Control-flow op types: one region each (their branches and loop bodies are functions of
#: their own), unverified with ``control_flow_region``; an ``If`` whose predicate has a value is
#: walked along its taken branch instead (``_Import.nested``).
_CONTROL_FLOW = {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"}

#: Compiled graphs of concrete functions, each entry alive while its function is.
_PROGRAMS = ProgramCache(32)


def concrete_function(model: Any, args: tuple, kwargs: dict) -> Any:
    """The concrete function a graph-only entry runs for these inputs (for a Keras model's
    ``predict``, the model's inference call that each of its batches runs)."""
    if isinstance(model, tf.types.experimental.ConcreteFunction):
        return model
    owner = keras_predict_owner(model)
    if owner is not None:
        return tf.function(lambda *inputs: owner(*inputs, training=False)).get_concrete_function(*args)
    if isinstance(model, tf.types.experimental.PolymorphicFunction):
        return model.get_concrete_function(*args, **kwargs)
    return model.call.get_concrete_function(*args, **kwargs)


class _Reader(GraphReader):
    """A FuncGraph as the kit's graph compiler reads it."""

    def ops(self, graph: Any) -> List[Any]:
        return graph.get_operations()

    def key(self, tensor: Any) -> tuple:
        # Its graph and name: Python wrappers of one graph tensor may differ.
        return (id(tensor.graph), tensor.name)

    def op_key(self, op: Any) -> tuple:
        return (id(op.graph), op.name)

    def skipped(self, op: Any) -> bool:
        return op.type in _SKIPPED

    def callee(self, op: Any) -> Optional[Tuple[Any, int]]:
        if op.type not in _CALLS:
            return None
        body = _callee(op, op.get_attr("f").name, 0)
        return None if body is None else (body, 0)


_READER = _Reader()


def _callee(op: Any, name: str, first: int) -> Any:
    """The graph of the function ``name`` an op calls with its inputs from ``first`` on, or None
    when it cannot be read or does not line up with the op (the op is then one region)."""
    try:
        function = op.graph._get_function(name)
        definition = getattr(function, "cached_definition", None) or function.definition
        body = function_def_to_graph.function_def_to_graph(definition)
    except Exception:
        return None
    if len(body.inputs) != len(op.inputs) - first or len(body.outputs) != len(op.outputs):
        return None
    return body


class FuncGraphCapture(GraphOnlyCaptureHooks):
    """The kit's graph-only capture of a graph-only entry: its concrete function for these
    inputs, compiled once, imported op by op by :class:`_Import`."""

    graph_only_refusals = refusals.GRAPH_ONLY

    def split(self) -> GraphEntryCall:
        request = self.request
        model, args, kwargs = request.model, request.args, request.kwargs
        self.predict = keras_predict_owner(model) is not None
        function = self.function = concrete_function(model, args, kwargs)
        self.call_kwargs = {} if self.predict else kwargs
        inputs = [
            value for value in tf.nest.flatten((args, self.call_kwargs)) if isinstance(value, tf.Tensor)
        ]
        captured = list(function.captured_inputs)
        # A captured resource handle (a variable) is handed over as it is.
        return GraphEntryCall(
            model, function, inputs, [(value, neutral_name(value.dtype) in KEPT) for value in captured]
        )

    def lookup(self, root: GraphEntryCall) -> Entry:
        graph = self.graph = root.function.graph
        return _PROGRAMS.lookup(
            id(root.function), (root.function,), lambda: compile_graph(_READER, graph, _outputs(graph))
        )

    def check_program(self, body: Any, key: Any) -> None:
        # Tracing built the graph without running it: a write or a random draw refuses here.
        prescan.graph(self.graph)

    def make_walk(self, session: Any, entry: Entry) -> _Import:
        request, function, call_kwargs = self.request, self.function, self.call_kwargs

        def run_entry() -> List[Any]:
            result = function(*request.args, **call_kwargs)
            return [value for value in tf.nest.flatten(result) if isinstance(value, tf.Tensor)]

        return _Import(session, _READER, entry, _outputs(self.graph), run_entry)

    def run(self, session: Any, walk: Any, root: GraphEntryCall, body: Any, args: List[Pair]) -> List[Pair]:
        forward = super().run(session, walk, root, body, args)
        # The loop of ``Model.predict`` around the imported forward (batching, the data
        # pipeline, the host copy of the result).
        return (
            walk.loop_region("predict_loop", forward, [("tf_op_type", "predict")], "predict_loop_region")
            if self.predict
            else forward
        )

    def provenance(self, walk: Any) -> Dict[str, str]:
        return {"tf_capture": "funcgraph", **replay_coverage("tf", walk.records, walk.opaque)}


def _outputs(graph: Any) -> List[Any]:
    """The graph tensors an entry returns (a loaded function keeps only specs as structured
    outputs: then its flat outputs)."""
    outputs = [
        tensor for tensor in tf.nest.flatten(graph.structured_outputs) if isinstance(tensor, tf.Tensor)
    ]
    return outputs or list(graph.outputs)


class _Import(GraphImport):
    """The kit's graph import, running each graph op eagerly through ``tf.raw_ops``."""

    dense_dtypes = DENSE
    kept_dtypes = KEPT

    def describe(self, value: Any) -> tuple:
        return tuple(value.shape), neutral_name(value.dtype)

    def edge_type(self, tensor: Any) -> tuple:
        static = tensor.shape.as_list() if tensor.shape.rank is not None else []
        return tuple(d or 0 for d in static), neutral_name(tensor.dtype)

    def nested(self, op: Any, ins: List[Pair]) -> List[Pair]:
        """One graph op: the branch an ``If`` takes is run in place, every other op is
        recorded by :meth:`visit`."""
        branch = _taken_branch(op, ins)
        if branch is not None:
            pairs = self.run_branch((id(op), branch), lambda: _callee(op, branch, 1), ins[1:])
            if pairs is not None:
                return pairs
        return self.visit(op, ins)

    def visit(self, op: Any, ins: List[Pair]) -> List[Pair]:
        if op.type == "Const":
            return [self.constant(tf.constant(tensor_util.MakeNdarray(op.get_attr("value"))))]
        inputs = [value for value, _ in ins]
        if op.type == "ReadVariableOp" and inputs and inputs[0] is not None:
            # Reading a captured variable is stateful in the OpDef but has no effect: its value
            # is a constant of this import (no module attribution).
            return [self.constant(tf.raw_ops.ReadVariableOp(resource=inputs[0], dtype=op.get_attr("dtype")))]
        control_flow = op.type in _CONTROL_FLOW
        runs = not control_flow and all(value is not None for value in inputs)
        return self.call_op(
            op,
            op_name(op.type),
            ins,
            (lambda: raw_op_call(op.type, inputs, op.get_attr, op.node_def.attr)) if runs else None,
            [("tf_op_type", op.type)],
            "control_flow_region" if control_flow else "opaque_region",
        )


def _taken_branch(op: Any, ins: List[Pair]) -> Optional[str]:
    """The name of the branch function an ``If`` (or ``StatelessIf``) op takes for this call,
    when its predicate's value is known; None otherwise (the op stays one region)."""
    if op.type not in ("If", "StatelessIf"):
        return None
    predicate = ins[0][0]
    if predicate is None or predicate.shape.rank != 0:
        return None
    return op.get_attr("then_branch" if bool(predicate) else "else_branch").name
