"""Derived gradients of a Paddle trace: leaf gradients of a loss through Paddle's own autodiff
(``paddle.grad``), and optionally per-op gradients from a guarded second AD replay, driven by the
kit's driver (:mod:`torchlens.adapter_kit.derived_grads`). These are not a captured backward
pass (``has_backward_pass`` stays False).

* Leaf gradients: the call runs again with nothing installed, on detached copies of the chosen
  inputs (``stop_gradient=False``); ``paddle.grad`` gives the gradients of every trainable
  parameter and of those inputs. ``paddle.grad`` accumulates nothing into ``.grad``, so nothing
  the user holds changes.
* Per-op gradients (``intermediate_grads=True``): the call runs once more with the capture's
  recorder installed on a shadow session (nothing goes to the core), then ``paddle.grad`` of the
  loss with respect to every recorded floating op output. A record is exposed only when that
  replay is an exact, unambiguous structural match of the capture (same functions, shapes and
  parents, in the same order) and reproduces the captured outputs; otherwise nothing is attached
  and ``trace.autograd.intermediate_unavailable`` says why."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, List, Tuple

import paddle

from torchlens.adapter_kit import derived_grads as kit
from torchlens.adapter_kit.capture_pipeline import shadow_run

from .capture import tensors_of


@dataclass(frozen=True)
class GradOptions(kit.GradOptions):
    """What to differentiate: ``loss_fn(output) -> scalar Tensor`` (default: the sum of every
    floating output), which positional inputs get gradients (``input_grad_argnums``), and
    whether to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""


def _chosen_inputs(args: tuple, options: GradOptions) -> Tuple[list, List[Tuple[str, Any]]]:
    """The call's arguments with each chosen input replaced by a differentiable detached copy."""
    call_args = list(args)
    chosen: List[Tuple[str, Any]] = []
    for position in options.input_grad_argnums:
        copy = args[position].detach()
        copy.stop_gradient = False
        call_args[position] = copy
        chosen.append((kit.input_target(position), copy))
    return call_args, chosen


def _grad(loss: Any, targets: List[Any]) -> List[Any]:
    # paddle.grad accumulates nothing into .grad: nothing the user holds changes.
    return paddle.grad([loss], targets, allow_unused=True) if targets else []


class GradHooks(kit.GradHooks):
    """Paddle's value-and-grad for the kit's gradient driver."""

    evidence = ("structural_match", "paddle_grad")
    loss_kind = "scalar paddle.Tensor"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: paddle.sum(output))"

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> kit.GradPass:
        """The call again with nothing installed (leaf gradients only; per-op gradients come
        from :meth:`op_pass`)."""
        runtime = self.trace._runtime
        params = [
            (kit.param_target(address), runtime.params[value_id])
            for value_id, address in runtime.param_addresses.items()
            if self.adapter.differentiable_input(runtime.params[value_id])
            and not runtime.params[value_id].stop_gradient
        ]
        call_args, chosen = _chosen_inputs(runtime.args, self.options)
        targets = params + chosen
        loss = loss_of(runtime.model(*call_args, **runtime.kwargs))
        grads = _grad(loss, [tensor for _, tensor in targets])
        return kit.GradPass(grads={name: grad for (name, _), grad in zip(targets, grads)})

    def op_pass(self, loss_of: Callable[[Any], Any]) -> kit.GradPass:
        """The call once more with the capture's own hooks on a shadow session."""
        runtime = self.trace._runtime
        call_args, _chosen = _chosen_inputs(runtime.args, self.options)
        shadow, _recorder, output = shadow_run(self.adapter, self.trace, call_args, runtime.kwargs)
        loss = loss_of(output)
        op_grads = shadow.op_grads(
            lambda value: self.adapter.differentiable_input(value) and not value.stop_gradient,
            partial(_grad, loss),
        )
        return kit.GradPass(outputs=tensors_of(output), replayed=shadow.signature(), op_grads=op_grads)
