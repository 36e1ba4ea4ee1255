"""Refusing a variable write or a random draw as the forward calls it, before it executes: the
fallback for a call the pre-run graph trace (``prescan.eager_entry``) could not trace, and a
second line behind it when the eager Python takes another path than the traced one.

For the capture (owner thread only), every Python function TensorFlow generates for a writing or
drawing op type (``gen_resource_variable_ops.assign_add_variable_op``,
``gen_random_ops.random_standard_normal``, ``gen_stateful_random_ops.stateful_standard_normal_v2``
...) is replaced, wherever a loaded TensorFlow module holds it (``from gen_x import *`` copies
it), by one that raises the refusal instead of running the op; a ``tf.function`` called inside
the forward (an ``AtomicFunction``) has its definition and callees scanned before it runs. Eager
``tf.random.*`` calls take an op seed from the context's Python generator before the op (when a
global seed is set); that generator's state is put back as the refusal is raised, so the next
draw is the one the user would have had.

``tf.raw_ops.<Op>`` (its own copy of the generated function) is replaced the same way. Not
covered (the op callback still refuses them, after the op ran): ops run through ``execute`` by
code that holds no generated function."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.eager.polymorphic_function import atomic_function

from torchlens.adapter_kit.function_sites import FunctionSites
from torchlens.adapter_kit.op_names import snake_case

from .prescan import OP_TYPES


def refused_op_types() -> Dict[str, str]:
    """Generated-function name → op type, for every registered op type that writes (except
    ``DestroyResourceOp``, which runs when a variable is garbage collected) or draws."""
    op_types = [op_type for op_type in dir(tf.raw_ops) if not op_type.startswith("_")]
    return {
        snake_case(op_type): op_type
        for op_type in OP_TYPES.refused(op_types)
        if op_type != "DestroyResourceOp"
    }


#: Every loaded TensorFlow module attribute holding the generated function of a refused op type:
#: the ``gen_*`` modules define them, ``tf.raw_ops`` holds them under their op types.
SITES = FunctionSites(
    "tensorflow",
    defines=lambda module: module.__name__.rsplit(".", 1)[-1].startswith("gen_"),
    names=refused_op_types,
    by_tag=lambda module: module.__name__.endswith(".raw_ops"),
)


def install(patches: Any) -> None:
    """Refuses writes and draws of the owner thread before they execute, until ``patches``
    restores everything."""
    seed_state = _seed_state(context)
    for module, name, op_type in SITES.sites():
        patches.wrap(module, name, _refusing(op_type, context, seed_state))
    patches.wrap(atomic_function.AtomicFunction, "call_flat", _scanning)


def _seed_state(context: Any) -> Optional[Any]:
    generator = getattr(context.context(), "_rng", None)
    return generator.getstate() if generator is not None else None


Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def _refusing(op_type: str, context: Any, seed_state: Any) -> Wrapper:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            if not context.executing_eagerly():
                # Building a graph (a tf.function traced inside the forward): nothing executes;
                # its call op is scanned before it runs (``_scanning``).
                return original(*args, **kwargs)
            generator = getattr(context.context(), "_rng", None)
            if generator is not None and seed_state is not None:
                generator.setstate(seed_state)
            raise OP_TYPES.refusal(op_type, "in the forward (refused before it ran)")

        return refuse

    return make


def _scanning(original: Callable[..., Any]) -> Callable[..., Any]:
    def call_flat(function: Any, *args: Any, **kwargs: Any) -> Any:
        OP_TYPES.check(
            _function_op_types(function, set()),
            f"in the tf.function {function.name!r} (refused before it ran)",
        )
        return original(function, *args, **kwargs)

    return call_flat


def _function_op_types(function: Any, seen: set) -> List[str]:
    """The op types of an ``AtomicFunction`` and of every function it calls (its children)."""
    if id(function) in seen:
        return []
    seen.add(id(function))
    found = [node.op for node in function.cached_definition.node_def]
    for child in getattr(function, "children", ()) or ():
        found.extend(_function_op_types(child, seen))
    return found
