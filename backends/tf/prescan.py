"""Refusing variable writes and random draws before the model runs. The op callback sees a write
or a draw only after the op ran (TensorFlow calls it afterwards), so what the forward will do is
read first:

* a Keras model called with ``training=True``: a trainable ``BatchNormalization`` layer updates
  its moving statistics (a variable write), and a layer owning a ``keras.random.SeedGenerator``
  (dropout, noise, random augmentation) draws random numbers and advances the generator's state;
* a graph-only entry: every op of the traced graph and of every function in its library (nested
  calls, ``While`` bodies and ``If``/``Case`` branches included; tracing a ``tf.function`` builds
  its graph without executing it);
* an eager entry (a Keras model, a ``tf.Module``, a plain function): the call is traced once in
  graph mode (``tf.function(..., autograph=False).get_concrete_function`` on the inputs'
  ``TensorSpec``\\ s), which runs the model's Python a second time but executes no op, and the
  graph is scanned the same way (``eager_entry``, the kit's
  :class:`~torchlens.adapter_kit.pre_run_scan.PreRunScan`: its verdict is cached per callable
  and input signature when it is clean or the call cannot be traced; a refusal is never cached).

A call that cannot be traced (Python that needs values: ``.numpy()``, ``if tensor:``) is left to
``guard.py``, which refuses a write or a draw as the op is called, before it executes."""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from torchlens.adapter_kit.op_type_refusals import OpTypeRefusals
from torchlens.adapter_kit.pre_run_scan import PreRunScan

from . import refusals

#: What a forward may not run, by op type (the kit's declarative check): writes of a variable or
#: other persistent state (variable assignments, scatters and optimizer updates on resource
#: variables, strided-slice assignment ``v[0].assign``, variable creation and destruction,
#: lookup-table writes, the TF1 reference-variable assignments) and stateful random draws (the
#: ``Stateless*`` ops and ``RandomIndexShuffle`` are deterministic functions of their seeds).
OP_TYPES = OpTypeRefusals(
    writes=re.compile(
        r"^(Assign\w*VariableOp|AssignVariableXlaConcatND|ResourceScatter\w*|Resource(Sparse)?Apply\w*"
        r"|ResourceStridedSliceAssign|VarHandleOp|DestroyResourceOp|LookupTable(Insert|Remove|Import)V2"
        r"|Assign|AssignAdd|AssignSub)$"
    ),
    draws=re.compile(
        r"Random|Multinomial|TruncatedNormal|^Rng|^Stateful(?!PartitionedCall)|NonDeterministicInts"
    ),
    refuse_write=refusals.variable_write,
    refuse_draw=refusals.rng,
    deterministic=re.compile(r"^Stateless"),
    # An op type the registry does not know is taken as stateful.
    stateful=lambda op_type: getattr(op_def_registry.get(op_type), "is_stateful", True),
)


def keras_training_call(model: Any, kwargs: dict) -> None:
    """A Keras model called with ``training=True``: refuses layers that would draw random
    numbers or write a variable, before the model is called."""
    keras = sys.modules.get("keras")
    if keras is None or not isinstance(model, keras.Layer) or kwargs.get("training") is not True:
        return
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if any(isinstance(value, keras.random.SeedGenerator) for value in vars(layer).values()):
            raise refusals.rng(f"the {type(layer).__name__} layer {layer.name!r} with training=True")
        if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable:
            raise refusals.variable_write(
                f"the BatchNormalization layer {layer.name!r} updates its moving statistics with "
                "training=True"
            )


def graph_op_types(graph: Any) -> Iterable[str]:
    """The op type of every node of a graph and of every function in its library: the functions
    it calls, ``While`` conditions and bodies, ``If``/``Case`` branches, at any depth (the
    library of a graph holds every function any of its functions refers to)."""
    definition = graph.as_graph_def()
    for node in definition.node:
        yield node.op
    for function in definition.library.function:
        for node in function.node_def:
            yield node.op


def graph(graph: Any) -> None:
    """Refuses a graph-only entry whose graph writes a variable or draws random numbers."""
    OP_TYPES.check(graph_op_types(graph), "in the entry's graph")


# ---- eager entries: one graph-mode trace of the call before it runs ------------------------------

_SCAN = PreRunScan(OP_TYPES, "in the forward (seen by the pre-run graph trace)")


def eager_entry(model: Any, args: tuple, kwargs: dict) -> str:
    """Traces an eager call once in graph mode (nothing executes) and refuses it when its graph
    writes a variable, draws random numbers or creates a variable. Returns how the call was
    checked: ``"graph"``, or ``"fallback: <why>"`` when it could not be traced (``guard.py`` then
    refuses a write or a draw as the op is called)."""

    def creates(next_creator: Any, **_kwargs: Any) -> Any:
        raise refusals.variable_write("a variable created inside the forward")

    def body(*inputs: Any, **named: Any) -> Any:
        with tf.variable_creator_scope(creates):
            return model(*inputs, **named)

    def trace() -> Iterable[str]:
        spec_args, spec_kwargs = tf.nest.map_structure(_spec, (args, kwargs))
        concrete = tf.function(body, autograph=False).get_concrete_function(*spec_args, **spec_kwargs)
        return graph_op_types(concrete.graph)

    return _SCAN.verdict(model, _signature(args, kwargs), trace)


def _spec(value: Any) -> Any:
    if isinstance(value, tf.Tensor) and not isinstance(value, tf.Variable):
        return tf.TensorSpec.from_tensor(value)
    return value


def _signature(args: tuple, kwargs: dict) -> str:
    """What a graph trace depends on: the structure, each tensor's shape and dtype, and every
    other argument's value."""

    def describe(value: Any) -> str:
        if isinstance(value, tf.Tensor) and not isinstance(value, tf.Variable):
            return f"T{tuple(value.shape)}:{value.dtype.name}"
        if isinstance(value, tf.Variable):
            return f"V{id(value)}"
        return f"{type(value).__qualname__}:{value!r}"

    return repr(tf.nest.map_structure(describe, (args, kwargs)))
