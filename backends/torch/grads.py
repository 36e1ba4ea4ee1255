"""Derived gradients on torch (``tl.backends.torch.GradOptions``): the preview backends' API, so
the same user code runs on every backend, computed with torch's own autograd and driven by the
kit's driver (:mod:`torchlens.adapter_kit.derived_grads`).

One auxiliary forward runs under capture with every op armed for gradients (the same hooks as
``save_grads=True``), on copies of the chosen inputs that require grad; its output must equal the
captured output or the call refuses (``derived_grad_replay_diverged``). ``torch.autograd.grad``
of the loss then gives the parameters' and the chosen inputs' gradients without touching any
``.grad`` the user holds, and fires the op hooks, which give the per-op records. Buffers the
auxiliary forward changes (batch-norm running statistics in training mode) are put back. These
are derived gradients: ``has_backward_pass`` stays False; for a captured backward of your own
loss, use ``save_grads=``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch

from torchlens.adapter_kit import derived_grads as kit
from torchlens.trace import Autograd

from .capture import flatten
from .dtypes import name_of


@dataclass(frozen=True)
class GradOptions(kit.GradOptions):
    """What to differentiate: ``loss_fn(output) -> scalar tensor`` (default: the sum of every
    floating output), which positional inputs get gradients (``input_grad_argnums``, keys
    ``inputs.<n>``; trainable parameters always do, keys ``params.<address>``), and whether to
    derive per-op gradients (at most ``max_intermediate_grads`` ops)."""


def differentiable(value: Any) -> bool:
    """Whether ``value`` is a floating (or complex) torch.Tensor."""
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _signature(op: Any) -> tuple:
    return (op.label, op.func_name, op.shape, [parent.label for parent in op.parents])


class _Hooks(kit.GradHooks):
    """A single pass: the auxiliary forward is a capture of its own with every op armed for
    gradients, so one ``torch.autograd.grad`` gives the leaf and the per-op gradients."""

    evidence = ("structural_match", "torch_autograd")
    loss_kind = "scalar torch.Tensor"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: output.sum())"

    def __init__(self, trace: Any, request: Any, adapter: Any) -> None:
        super().__init__(trace, request.options.grad_options, adapter)
        self.request = request

    def output_leaves(self, output: Any) -> List[Any]:
        return [leaf for _, leaf in flatten(output, "")]

    def loss_part(self, leaf: Any) -> Any:
        return leaf.float().sum() if leaf.is_floating_point() else None

    def is_scalar(self, loss: Any) -> bool:
        return isinstance(loss, torch.Tensor) and loss.numel() == 1

    def captured(self) -> List[kit.CapturedOp]:
        """Every op, signed by its label, function, shape and parents (the auxiliary forward is
        a capture too, so all of it is compared)."""
        return [
            kit.CapturedOp(op.label, _signature(op), op.kind == "compute" and kit.is_floating_dtype(op.dtype))
            for op in self.trace.ops
        ]

    def captured_outputs(self) -> Optional[List[Tuple[Any, str]]]:
        # every torch capture keeps its output
        return [(tensor.detach(), name_of(tensor.dtype)) for _, tensor in flatten(self.trace.output, "")]

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> kit.GradPass:
        """The auxiliary capture on copies of the chosen inputs that require grad;
        ``torch.autograd.grad`` leaves every ``.grad`` the user holds alone, and buffers the
        forward changed (batch-norm running statistics) are put back."""
        request, options, model = self.request, self.options, self.request.model
        args = list(request.args)
        inputs: List[Tuple[str, Any]] = []
        for index in options.input_grad_argnums:
            args[index] = args[index].detach().clone().requires_grad_(True)
            inputs.append((kit.input_target(index), args[index]))
        named = dict(model.named_parameters()) if isinstance(model, torch.nn.Module) else {}
        targets = [
            (kit.param_target(address), named[address])
            for address in self.trace.params
            if address in named and named[address].requires_grad and differentiable(named[address])
        ] + inputs
        buffers = (
            [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
            if isinstance(model, torch.nn.Module)
            else []
        )
        auxiliary_request = dataclasses.replace(
            request,
            args=tuple(args),
            options=dataclasses.replace(request.options, grad_options=None, backward_ready=False),
            save=dataclasses.replace(request.save, mode="none", selector=None),
            save_grads=True,
        )
        try:
            with torch.enable_grad():
                auxiliary = self.adapter.capture(auxiliary_request)
                output = auxiliary.output
                loss = loss_of(output)
                values = [value for _, value in targets]
                grads = torch.autograd.grad(loss, values, allow_unused=True) if values else ()
        finally:
            with torch.no_grad():
                for buffer, saved in buffers:
                    if buffer.shape == saved.shape:
                        buffer.copy_(saved)
        result = kit.GradPass(
            # An unused leaf has a zero gradient (as the other backends report it).
            grads={
                name: (torch.zeros_like(value) if grad is None else grad).detach()
                for (name, value), grad in zip(targets, grads)
            },
            outputs=[leaf.detach() for leaf in self.output_leaves(output)],
        )
        if per_op:
            # The op hooks fired during torch.autograd.grad: each auxiliary op holds its gradient.
            result.replayed = [_signature(op) for op in auxiliary.ops]
            result.op_grads = [op.grad for op in auxiliary.ops]
        return result


def derive(trace: Any, request: Any, adapter: Any) -> Autograd:
    """Leaf (and optionally per-op) derived gradients of ``request``'s loss for ``trace``."""
    return kit.derive(_Hooks(trace, request, adapter))


__all__ = ["GradOptions", "derive"]
