"""Refusing variable writes and random draws before the model runs. The op callback sees a write
or a draw only after the op ran (TensorFlow calls it afterwards), so wherever the model's
structure already says what the forward will do, it is read first:

* a Keras model called with ``training=True``: a trainable ``BatchNormalization`` layer updates
  its moving statistics (a variable write), and a layer owning a ``keras.random.SeedGenerator``
  (dropout, noise, random augmentation) draws random numbers and advances the generator's state;
* a graph-only entry: every op of the traced graph and of the functions it calls (tracing a
  ``tf.function`` builds its graph without executing it).

What neither shows (a ``tf.Module`` or plain function that calls ``assign`` or
``tf.random.normal``) is still refused from the op callback, after that op ran once."""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable

from . import refusals

#: Op types that write a variable (replay and the saved values would see the new value).
WRITES = re.compile(
    r"^(Assign\w*VariableOp|ResourceScatter\w*|ResourceApply\w*|VarHandleOp|DestroyResourceOp)$"
)

#: Stateful random ops (replay would draw again); ``Stateless*`` ops are pure.
_RANDOM = re.compile(r"Random|Multinomial|TruncatedNormal|RngSkip|RngReadAndSkip")


def is_random(op_type: str) -> bool:
    """Whether an op type draws from a random state."""
    return bool(_RANDOM.search(op_type)) and not op_type.startswith("Stateless")


def check_op_type(op_type: str, where: str) -> None:
    """Refuses a write or a random draw of ``op_type`` (``where`` says where it was seen)."""
    if is_random(op_type):
        raise refusals.rng(f"{op_type} {where}")
    if WRITES.match(op_type):
        raise refusals.variable_write(f"{op_type} {where}")


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
    """The op type of every node of a graph and of every function in its library."""
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
