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
  graph is scanned the same way (``eager_entry``). Its verdict is cached per callable and input
  signature when it is clean or the call cannot be traced; a refusal is never cached.

A call that cannot be traced (Python that needs values: ``.numpy()``, ``if tensor:``) is left to
``guard.py``, which refuses a write or a draw as the op is called, before it executes."""

from __future__ import annotations

import re
import sys
import weakref
from typing import Any, Dict, Iterable, Optional

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from torchlens.errors import BackendUnsupportedError

from . import refusals

#: Op types that write a variable or other persistent state (replay and the saved values would
#: see the new value): variable assignments, scatters and optimizer updates on resource
#: variables, strided-slice assignment (``v[0].assign``), variable creation and destruction,
#: lookup-table writes, and the TF1 reference-variable assignments.
WRITES = re.compile(
    r"^(Assign\w*VariableOp|AssignVariableXlaConcatND|ResourceScatter\w*|Resource(Sparse)?Apply\w*"
    r"|ResourceStridedSliceAssign|VarHandleOp|DestroyResourceOp|LookupTable(Insert|Remove|Import)V2"
    r"|Assign|AssignAdd|AssignSub)$"
)

#: Random op types (replay would draw again). Only stateful ones count: the ``Stateless*`` ops and
#: ``RandomIndexShuffle`` are deterministic functions of their seed inputs.
_RANDOM = re.compile(
    r"Random|Multinomial|TruncatedNormal|^Rng|^Stateful(?!PartitionedCall)|NonDeterministicInts"
)


def is_random(op_type: str) -> bool:
    """Whether an op type draws from a random state (a stateful random op)."""
    if op_type.startswith("Stateless") or not _RANDOM.search(op_type):
        return False

    op_def = op_def_registry.get(op_type)
    return op_def is None or op_def.is_stateful


def is_write(op_type: str) -> bool:
    """Whether an op type writes a variable or other persistent state."""
    return bool(WRITES.match(op_type))


def refusal(op_type: str, where: str) -> Optional[Exception]:
    """The refusal of a write or a random draw of ``op_type`` (``where`` says where it was
    seen), or None for any other op type."""
    if is_random(op_type):
        return refusals.rng(f"{op_type} {where}")
    if is_write(op_type):
        return refusals.variable_write(f"{op_type} {where}")
    return None


def check_op_type(op_type: str, where: str) -> None:
    """Refuses a write or a random draw of ``op_type``."""
    error = refusal(op_type, where)
    if error is not None:
        raise error


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
    for op_type in graph_op_types(graph):
        check_op_type(op_type, "in the entry's graph")


# ---- eager entries: one graph-mode trace of the call before it runs ------------------------------

#: callable → {input signature → "graph" (traced and clean) or "fallback: <why>"}.
_VERDICTS: weakref.WeakKeyDictionary[Any, Dict[str, str]] = weakref.WeakKeyDictionary()


def eager_entry(model: Any, args: tuple, kwargs: dict) -> str:
    """Traces an eager call once in graph mode (nothing executes) and refuses it when its graph
    writes a variable, draws random numbers or creates a variable. Returns how the call was
    checked: ``"graph"``, or ``"fallback: <why>"`` when it could not be traced (``guard.py`` then
    refuses a write or a draw as the op is called)."""
    key = _signature(args, kwargs)
    cached = _cached(model, key)
    if cached is not None:
        return cached

    def creates(next_creator: Any, **_kwargs: Any) -> Any:
        raise refusals.variable_write("a variable created inside the forward")

    def body(*inputs: Any, **named: Any) -> Any:
        with tf.variable_creator_scope(creates):
            return model(*inputs, **named)

    spec_args, spec_kwargs = tf.nest.map_structure(_spec, (args, kwargs))
    try:
        concrete = tf.function(body, autograph=False).get_concrete_function(*spec_args, **spec_kwargs)
    except BackendUnsupportedError:
        raise
    except Exception as error:  # Python that cannot run on symbolic tensors
        verdict = f"fallback: {type(error).__name__}"
    else:
        for op_type in graph_op_types(concrete.graph):
            check_op_type(op_type, "in the forward (seen by the pre-run graph trace)")
        verdict = "graph"
    _remember(model, key, verdict)
    return verdict


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


def _cached(model: Any, key: str) -> Optional[str]:
    try:
        return _VERDICTS.get(model, {}).get(key)
    except TypeError:  # not weakly referenceable (no cache)
        return None


def _remember(model: Any, key: str, verdict: str) -> None:
    try:
        _VERDICTS.setdefault(model, {})[key] = verdict
    except TypeError:
        pass
