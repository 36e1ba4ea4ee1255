"""Derived gradients of a TensorFlow trace: one auxiliary forward under a persistent
``tf.GradientTape``, driven by the kit's driver (:mod:`torchlens.adapter_kit.derived_grads`).
These are not a captured backward pass (``has_backward_pass`` stays False).

The call runs once more with the capture's recorder installed on a shadow session (nothing goes
to the core); the tape watches the floating inputs and the trainable variables of
``trace.params`` explicitly. The auxiliary output must equal the captured output, or the call
refuses (``derived_grad_replay_diverged``). One ``tape.gradient`` then gives the gradients of
the floating inputs (``inputs.<n>``) and the variables (``params.<address>``). With
``intermediate_grads=True`` every floating op output of the same auxiliary forward is a gradient
target too (a single pass); a per-op record is attached only when that forward is an exact,
unambiguous structural match of the capture (same functions and shapes, in order), otherwise
``trace.autograd.intermediate_unavailable`` says why."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, List, Optional, Tuple

import tensorflow as tf

from torchlens.adapter_kit import derived_grads as kit
from torchlens.adapter_kit.capture_pipeline import shadow_run


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar tf.Tensor`` (default: the sum of every
    floating output), and whether to derive per-op gradients (at most
    ``max_intermediate_grads`` ops). Every floating input and trainable variable gets a
    gradient (TensorFlow has no ``input_grad_argnums``)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _floating(tensor: Any) -> bool:
    return getattr(tensor, "dtype", None) is not None and tensor.dtype.is_floating


class GradHooks(kit.GradHooks):
    """TensorFlow's value-and-grad (a gradient tape) for the kit's gradient driver."""

    evidence = ("structural_match", "tf_gradient_tape")
    loss_kind = "scalar tf.Tensor"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: tf.reduce_sum(output))"

    def loss_part(self, leaf: Any) -> Any:
        return tf.reduce_sum(tf.cast(leaf, tf.float32)) if _floating(leaf) else None

    def is_scalar(self, loss: Any) -> bool:
        return isinstance(loss, (tf.Tensor, tf.Variable)) and loss.shape.num_elements() == 1

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> kit.GradPass:
        trace = self.trace
        runtime = trace._runtime
        args, kwargs = runtime.args, runtime.kwargs
        params: List[Tuple[str, Any]] = [
            (kit.param_target(runtime.param_addresses[value_id]), variable)
            for value_id, variable in runtime.params.items()
            if variable.trainable and variable.dtype.is_floating
        ]
        inputs = [
            (kit.input_target(index), value)
            for index, value in enumerate(args)
            if isinstance(value, tf.Tensor) and _floating(value)
        ]
        with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            for _name, value in inputs:
                tape.watch(value)
            for _name, variable in params:
                tape.watch(variable)
            shadow, _recorder, output = shadow_run(self.adapter, trace, args, kwargs)
            loss = loss_of(output)
        targets = inputs + params
        grads = tape.gradient(loss, [value for _, value in targets]) if targets else []
        grads_by_name = {name: grad for (name, _), grad in zip(targets, grads)}
        result = kit.GradPass(grads=grads_by_name, outputs=self.adapter.output_leaves(output))
        if per_op:
            # The same tape gives every recorded floating op output's gradient (one pass).
            op_grads = shadow.op_grads(_floating, partial(tape.gradient, loss))
            result.replayed, result.op_grads = shadow.signature(), op_grads
        del tape
        return result
