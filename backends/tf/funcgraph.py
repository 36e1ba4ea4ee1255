"""The FuncGraph static importer: graph-only entries (a ``tf.function`` root, a concrete function
such as a SavedModel signature, a Keras model whose ``call`` is a ``tf.function``). The entry's
concrete function is traced for the given inputs; its graph is walked in order and pruned to the
ops the outputs depend on. Concrete values come from running each pure op eagerly through
``tf.raw_ops`` on its inputs' values (placeholders are the call's inputs and the function's
captures); nested calls and the branch an ``If`` takes (its predicate's value) are walked in
place; a ``While`` or ``Case`` is one control-flow region (its body is not walked for values) and
a stateful op (or one whose inputs have no value) an opaque region, recorded without a value and
replayed as unverified. There is no module attribution (``function_root``),
and ``recurrence_detection`` is False (graph node names are one-shot sites)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List

import tensorflow as tf
from tensorflow.python.framework import function_def_to_graph, tensor_util

from torchlens.adapter_kit import CaptureSession
from torchlens.adapter_kit.program_import import Pair, ProgramImport

from . import prescan, refusals
from .capture import op_name, raw_op_call
from .dtypes import DENSE, KEPT, neutral_name
from .refusals import keras_predict_owner

#: Function-call op types whose callee is walked in place (inlined).
_CALLS = {"StatefulPartitionedCall", "PartitionedCall"}

#: Callee graphs built while importing (kept alive: tensors are keyed by identity).
_CALLEES: List[Any] = []

#: Op types that only pass control or structure (not recorded).
_SKIPPED = {"NoOp", "Placeholder"}


#: Control-flow op types: one region each (their branches and loop bodies are functions of
#: their own), unverified with ``control_flow_region``; an ``If`` whose predicate has a value is
#: walked along its taken branch instead (``_taken_branch``).
_CONTROL_FLOW = {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"}


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


def _needed(graph: Any, outputs: List[Any]) -> set:
    """Names of the ops the outputs depend on (data edges)."""
    needed: set = set()
    stack = [tensor.op for tensor in outputs]
    while stack:
        op = stack.pop()
        if op.name in needed:
            continue
        needed.add(op.name)
        stack.extend(tensor.op for tensor in op.inputs)
    return needed


def capture(adapter: Any, request: Any, runtime_type: Any) -> Any:
    """Imports a graph-only entry as a trace."""
    options = dataclasses.replace(request.options, recurrence_detection=False)
    request = dataclasses.replace(request, options=options)
    model, args, kwargs = request.model, request.args, request.kwargs
    predict = keras_predict_owner(model) is not None
    function = concrete_function(model, args, kwargs)
    graph = function.graph
    # Tracing built the graph without running it: a write or a random draw refuses here.
    prescan.graph(graph)
    call_kwargs = {} if predict else kwargs
    ran: List[Any] = []

    def ran_outputs() -> List[Any]:
        """The entry's output values from one run of its graph, for outputs the op-by-op
        ladder could not compute (behind a control-flow or stateful region)."""
        if not ran:
            result = function(*args, **call_kwargs)
            ran.extend(value for value in tf.nest.flatten(result) if isinstance(value, tf.Tensor))
        return ran

    user_inputs = [value for value in tf.nest.flatten((args, call_kwargs)) if isinstance(value, tf.Tensor)]
    captured = list(function.captured_inputs)
    placeholders = list(graph.inputs)
    if len(placeholders) != len(user_inputs) + len(captured):
        raise refusals.refuse(
            "the graph-only entry's inputs do not line up with the call's tensor arguments",
            "capability_unsupported",
            "pass the entry's inputs as tf.Tensor arguments, or trace the eager model",
        )
    outputs = [
        tensor for tensor in tf.nest.flatten(graph.structured_outputs) if isinstance(tensor, tf.Tensor)
    ]
    if not outputs:
        outputs = list(graph.outputs)  # a loaded function keeps only specs as structured outputs
    output_index = {_key(tensor): index for index, tensor in enumerate(outputs)}
    with CaptureSession(request) as session:
        name = getattr(model, "__name__", type(model).__name__)
        session.module(0, ["self"], str(name), False, False)
        session.extra("provenance.module_identity_mode", "function_root")
        session.extra("provenance.tf_capture", "funcgraph")
        importer = _Import(session)
        #: Graph tensor key → value id, and → its concrete value (graph tensors stay alive with
        #: their graphs, which this import holds).
        ids: Dict[tuple, int] = {}
        known: Dict[tuple, Any] = {}

        def bind(tensor: Any, pair: Pair) -> None:
            ids[_key(tensor)] = pair[1]
            if pair[0] is not None:
                known[_key(tensor)] = pair[0]

        for index, (placeholder, value) in enumerate(zip(placeholders, user_inputs + captured)):
            if index < len(user_inputs):
                bind(placeholder, importer.input(f"inputs.{index}", value))
            elif neutral_name(value.dtype) in KEPT:
                bind(placeholder, importer.constant(value))
            else:
                known[_key(placeholder)] = value  # a captured resource handle (a variable)
        session.enter(0)
        session.exit(0, [], [])
        state = {"opaque": 0}

        def walk(graph: Any, outputs: List[Any]) -> None:
            needed = _needed(graph, outputs)
            for op in graph.get_operations():
                if op.name not in needed or op.type in _SKIPPED:
                    continue
                if op.type in _CALLS and _inline(op, graph, walk, known, ids, op.get_attr("f").name, 0):
                    continue
                branch = _taken_branch(op, known)
                if branch is not None and _inline(op, graph, walk, known, ids, branch, 1):
                    continue
                visit(op)

        def visit(op: Any) -> None:
            if op.type == "Const":
                value = tf.constant(tensor_util.MakeNdarray(op.get_attr("value")))
                return bind(op.outputs[0], importer.constant(value))
            ins = [(known.get(_key(tensor)), ids.get(_key(tensor))) for tensor in op.inputs]
            inputs = [value for value, _ in ins]
            results = None
            if op.type == "ReadVariableOp" and inputs and inputs[0] is not None:
                # Reading a captured variable is stateful in the OpDef but has no effect: its
                # value is a constant of this import (no module attribution).
                value = tf.raw_ops.ReadVariableOp(resource=inputs[0], dtype=op.get_attr("dtype"))
                return bind(op.outputs[0], importer.constant(value))
            control_flow = op.type in _CONTROL_FLOW
            call = None
            if not control_flow and all(value is not None for value in inputs):
                try:
                    call = raw_op_call(op.type, inputs, op.get_attr, op.node_def.attr)
                    if call is not None:
                        out = call[0](**call[1])
                        results = list(out) if isinstance(out, (list, tuple)) else [out]
                except Exception:
                    results = None
            values, described = [], []
            for index, tensor in enumerate(op.outputs):
                value = results[index] if results is not None and index < len(results) else None
                if value is None and _key(tensor) in output_index:
                    value = ran_outputs()[output_index[_key(tensor)]]
                values.append(value)
                described.append(_described(tensor, value))
            keep = all(value is not None and dtype in KEPT for value, (_, dtype) in zip(values, described))
            pairs = importer.op(
                op_name(op.type),
                ins,
                values,
                [("tf_op_type", op.type)],
                call[0] if results is not None else None,
                call[1] if results is not None else None,
                described,
                indexed=False,
                keep=keep,
                reason="control_flow_region" if control_flow else "opaque_region",
            )
            if any(_key(tensor) not in ids and neutral_name(tensor.dtype) in DENSE for tensor in op.inputs):
                # Self-consistency: a dense input no walked op, input or capture produced.
                importer.unresolved.update(value_id for _, value_id in pairs)
            for tensor, pair in zip(op.outputs, pairs):
                bind(tensor, pair)
            if results is None:
                state["opaque"] += 1

        walk(graph, outputs)
        opaque = state["opaque"]
        returned = [ids[_key(tensor)] for tensor in outputs]
        if predict:
            returned = _predict_loop(importer, returned)
            opaque += 1
        for index, value_id in enumerate(returned):
            session.output("output" if len(returned) == 1 else f"output.{index}", value_id)
        if opaque:
            session.extra("provenance.tf_opaque_ops", str(opaque))
        session.extra(
            "provenance.tf_replayable_ops",
            str(sum(1 for record in importer.records.values() if not record.opaque)),
        )
        runtime = runtime_type(
            records=importer.records,
            reference=adapter.reference_of(request),
            values=importer.values,
            model=model,
            args=args,
            kwargs=kwargs,
            param_addresses={},
            unresolved=importer.unresolved,
        )
        trace = session.finish(adapter, runtime=runtime)
    trace.options = dataclasses.replace(options, module_identity_mode="function_root")
    return trace


class _Import(ProgramImport):
    """The kit's program import, describing values as TensorFlow does."""

    def describe(self, value: Any) -> tuple:
        return tuple(value.shape), neutral_name(value.dtype)


def _described(tensor: Any, value: Any) -> tuple:
    """An op output's shape (its value's, else the graph's static shape) and dtype."""
    if value is not None:
        return tuple(value.shape), neutral_name(tensor.dtype)
    static = tensor.shape.as_list() if tensor.shape.rank is not None else []
    return tuple(d or 0 for d in static), neutral_name(tensor.dtype)


def _predict_loop(importer: ProgramImport, forward: List[int]) -> List[int]:
    """The loop of ``Model.predict`` around the imported forward (batching, the data pipeline,
    the host copy of the result): one region reading the forward's outputs, whose values are
    the forward's (what the whole input as one batch gives). Replay cannot check it per op
    (``predict_loop_region``); validation compares its outputs with a real ``predict`` call."""
    values = [importer.values.get(value_id) for value_id in forward]
    described = [
        (tuple(value.shape), neutral_name(value.dtype)) if value is not None else ((), "float32")
        for value in values
    ]
    pairs = importer.op(
        "predict_loop",
        list(zip(values, forward)),
        values,
        [("tf_op_type", "predict")],
        described=described,
        keep=all(value is not None for value in values),
        reason="predict_loop_region",
    )
    return [value_id for _, value_id in pairs]


def _taken_branch(op: Any, known: Dict[tuple, Any]) -> Any:
    """The name of the branch function an ``If`` (or ``StatelessIf``) op takes for this call,
    when its predicate's value is known; None otherwise (the op stays one region)."""
    if op.type not in ("If", "StatelessIf"):
        return None
    predicate = known.get(_key(op.inputs[0]))
    if predicate is None or predicate.shape.rank != 0:
        return None
    return op.get_attr("then_branch" if bool(predicate) else "else_branch").name


def _inline(
    op: Any, graph: Any, walk: Any, known: Dict[tuple, Any], ids: Dict[tuple, int], name: str, first: int
) -> bool:
    """Walks a callee in place of the op calling it (a function call, or the branch an ``If``
    takes): its placeholders are the op's inputs from ``first`` on, its outputs are the op's
    outputs. False when the callee cannot be read (the op is then one region)."""
    inputs = list(op.inputs)[first:]
    try:
        callee = graph._get_function(name)
        definition = callee.cached_definition if hasattr(callee, "cached_definition") else callee.definition
        body = function_def_to_graph.function_def_to_graph(definition)
    except Exception:
        return False
    if len(body.inputs) != len(inputs) or len(body.outputs) != len(op.outputs):
        return False
    _CALLEES.append(body)
    del _CALLEES[:-64]
    for placeholder, tensor in zip(body.inputs, inputs):
        if _key(tensor) in known:
            known[_key(placeholder)] = known[_key(tensor)]
        if _key(tensor) in ids:
            ids[_key(placeholder)] = ids[_key(tensor)]
    walk(body, list(body.outputs))
    for result, tensor in zip(body.outputs, op.outputs):
        if _key(result) in known:
            known[_key(tensor)] = known[_key(result)]
        if _key(result) in ids:
            ids[_key(tensor)] = ids[_key(result)]
    return True


def _key(tensor: Any) -> tuple:
    """A graph tensor's identity (its graph and name: Python wrappers of one tensor may differ)."""
    return (id(tensor.graph), tensor.name)
