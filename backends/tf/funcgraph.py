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
from torchlens.adapter_kit.replay import ReplayRecord, ValueRef

from . import prescan, refusals
from .capture import _attr, _raw_op, op_name
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
        values: Dict[int, Any] = {}
        records: Dict[int, ReplayRecord] = {}
        #: id(graph tensor) → value id, and → its concrete value (graph tensors stay alive with
        #: their graphs, which this import holds).
        ids: Dict[tuple, int] = {}
        known: Dict[tuple, Any] = {}

        def new(tensor: Any, value: Any) -> int:
            value_id = session.new_value_id()
            ids[_key(tensor)] = value_id
            if value is not None:
                values[value_id] = value
                known[_key(tensor)] = value
            return value_id

        for index, (placeholder, value) in enumerate(zip(placeholders, user_inputs + captured)):
            if index < len(user_inputs):
                value_id = new(placeholder, value)
                session.input(
                    f"inputs.{index}", value_id, value, tuple(value.shape), neutral_name(value.dtype)
                )
            elif neutral_name(value.dtype) in KEPT:
                value_id = new(placeholder, value)
                session.constant(value_id, value, tuple(value.shape), neutral_name(value.dtype))
            else:
                known[_key(placeholder)] = value  # a captured resource handle (a variable)
        session.enter(0)
        session.exit(0, [], [])
        state = {"opaque": 0}
        unresolved: set = set()

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
                value_id = new(op.outputs[0], value)
                session.constant(value_id, value, tuple(value.shape), neutral_name(value.dtype))
                return
            inputs = [known.get(_key(tensor)) for tensor in op.inputs]
            results = None
            if op.type == "ReadVariableOp" and inputs and inputs[0] is not None:
                # Reading a captured variable is stateful in the OpDef but has no effect.
                value = tf.raw_ops.ReadVariableOp(resource=inputs[0], dtype=op.get_attr("dtype"))
                value_id = new(op.outputs[0], value)
                session.constant(value_id, value, tuple(value.shape), neutral_name(value.dtype))
                return
            control_flow = op.type in _CONTROL_FLOW
            found = None if control_flow else _raw_op(op.type)
            kwargs_of: Dict[str, Any] = {}
            if found is not None and all(value is not None for value in inputs):
                raw, op_def, accepted = found
                names = accepted[: len(op_def.input_arg)]
                position = 0
                try:
                    for arg, arg_name in zip(op_def.input_arg, names):
                        if arg.number_attr or arg.type_list_attr:
                            count = (
                                op.get_attr(arg.number_attr)
                                if arg.number_attr
                                else len(op.get_attr(arg.type_list_attr))
                            )
                            kwargs_of[arg_name] = list(inputs[position : position + count])
                            position += count
                        else:
                            kwargs_of[arg_name] = inputs[position]
                            position += 1
                    for attr_name in op.node_def.attr:
                        if attr_name in accepted and attr_name not in kwargs_of:
                            kwargs_of[attr_name] = _attr(op.get_attr(attr_name))
                    out = raw(**kwargs_of)
                    results = list(out) if isinstance(out, (list, tuple)) else [out]
                except Exception:
                    results = None
            if op.type == "ReadVariableOp" and results is not None:
                # A variable's value: a constant of this import (no module attribution).
                value = results[0]
                value_id = new(op.outputs[0], value)
                session.constant(value_id, value, tuple(value.shape), neutral_name(value.dtype))
                return
            parents = [
                (ids[_key(tensor)], position)
                for position, tensor in enumerate(op.inputs)
                if _key(tensor) in ids
            ]
            # Self-consistency: a dense input no walked op, input or capture produced.
            dangling = any(
                _key(tensor) not in ids and neutral_name(tensor.dtype) in DENSE for tensor in op.inputs
            )
            described = []
            single = len(op.outputs) == 1
            for index, tensor in enumerate(op.outputs):
                value = results[index] if results is not None and index < len(results) else None
                if value is None and _key(tensor) in output_index:
                    value = ran_outputs()[output_index[_key(tensor)]]
                value_id = new(tensor, value)
                if dangling:
                    unresolved.add(value_id)
                dtype = neutral_name(tensor.dtype)
                if value is not None:
                    shape = tuple(value.shape)
                else:
                    shape = tuple(
                        d or 0 for d in (tensor.shape.as_list() if tensor.shape.rank is not None else [])
                    )
                described.append((value_id, value, shape, dtype))
                if results is None:
                    reason = "control_flow_region" if control_flow else "opaque_region"
                    records[value_id] = ReplayRecord(
                        None, op_name(op.type), opaque=True, region_reason=reason
                    )
                else:
                    template = {key: _template(item, op, inputs, ids) for key, item in kwargs_of.items()}
                    records[value_id] = ReplayRecord(
                        found[0], op_name(op.type), (), template, None if single else index
                    )
            if results is None:
                state["opaque"] += 1
            keep = all(value is not None and dtype in KEPT for _v, value, _s, dtype in described)
            session.op(op_name(op.type), parents, described, attributes=[("tf_op_type", op.type)], keep=keep)

        walk(graph, outputs)
        opaque = state["opaque"]
        returned = [ids[_key(tensor)] for tensor in outputs]
        if predict:
            returned = _predict_loop(session, returned, values, records)
            opaque += 1
        for index, value_id in enumerate(returned):
            session.output("output" if len(returned) == 1 else f"output.{index}", value_id)
        if opaque:
            session.extra("provenance.tf_opaque_ops", str(opaque))
        session.extra(
            "provenance.tf_replayable_ops", str(sum(1 for record in records.values() if not record.opaque))
        )
        runtime = runtime_type(
            records=records,
            reference=adapter.reference_of(request),
            values=values,
            model=model,
            args=args,
            kwargs=kwargs,
            param_addresses={},
            unresolved=unresolved,
        )
        trace = session.finish(adapter, runtime=runtime)
    trace.options = dataclasses.replace(options, module_identity_mode="function_root")
    return trace


def _predict_loop(
    session: Any, forward: List[int], values: Dict[int, Any], records: Dict[int, ReplayRecord]
) -> List[int]:
    """The loop of ``Model.predict`` around the imported forward (batching, the data pipeline,
    the host copy of the result): one region reading the forward's outputs, whose values are
    the forward's (what the whole input as one batch gives). Replay cannot check it per op
    (``predict_loop_region``); validation compares its outputs with a real ``predict`` call."""
    parents = [(value_id, position) for position, value_id in enumerate(forward)]
    described = []
    for value_id in forward:
        value = values.get(value_id)
        loop_id = session.new_value_id()
        if value is not None:
            values[loop_id] = value
        shape = tuple(value.shape) if value is not None else ()
        dtype = neutral_name(value.dtype) if value is not None else "float32"
        described.append((loop_id, value, shape, dtype))
        records[loop_id] = ReplayRecord(
            None, "predict_loop", opaque=True, region_reason="predict_loop_region"
        )
    keep = all(value is not None for _v, value, _s, _d in described)
    session.op("predict_loop", parents, described, attributes=[("tf_op_type", "predict")], keep=keep)
    return [loop_id for loop_id, _v, _s, _d in described]


def _template(item: Any, op: Any, inputs: List[Any], ids: Dict[tuple, int]) -> Any:
    """A replay argument: an input with a value id becomes its reference; a captured resource
    handle or an attribute stays as it is."""
    if isinstance(item, list):
        return [_template(sub, op, inputs, ids) for sub in item]
    for tensor, value in zip(op.inputs, inputs):
        if value is item and _key(tensor) in ids:
            return ValueRef(ids[_key(tensor)])
    return item


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
