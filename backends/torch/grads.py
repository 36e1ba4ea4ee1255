"""Derived gradients on torch (``tl.backends.torch.GradOptions``): the preview backends' API, so
the same user code runs on every backend, computed with torch's own autograd.

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
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from torchlens.adapter_kit.derived_grads import check_intermediate_cap, mark_unavailable
from torchlens.adapter_kit.replay import values_match
from torchlens.errors import BackendUnsupportedError, CaptureError
from torchlens.trace import Autograd, DerivedGrad

from .capture import flatten
from .dtypes import name_of

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar tensor`` (default: the sum of every
    floating output), which positional inputs get gradients (``input_grad_argnums``, keys
    ``inputs.<n>``; trainable parameters always do, keys ``params.<address>``), and whether to
    derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _loss(options: GradOptions, output: Any) -> torch.Tensor:
    if options.loss_fn is not None:
        loss = options.loss_fn(output)
    else:
        parts = [leaf.float().sum() for _, leaf in flatten(output, "") if leaf.is_floating_point()]
        loss = torch.stack(parts).sum() if parts else None
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise BackendUnsupportedError(
            "the loss must be a scalar torch.Tensor",
            "option_value_invalid",
            "pass GradOptions(loss_fn=lambda output: output.sum())",
            framework="torch",
        )
    return loss


def check_options(request: Any) -> None:
    """Refuses grad options the torch backend cannot honour, before anything runs."""
    options = request.options.grad_options
    if not isinstance(options, GradOptions):
        raise BackendUnsupportedError(
            "grad_options for the torch backend must be tl.backends.torch.GradOptions",
            "option_unsupported",
            "pass tl.backends.torch.GradOptions(loss_fn=..., input_grad_argnums=(0,))",
            framework="torch",
        )
    if request.interventions or request.stop_after is not None:
        raise BackendUnsupportedError(
            "grad_options cannot combine with intervene= or stop_after=",
            "option_unsupported",
            "take derived gradients in a separate tl.trace call",
            framework="torch",
        )
    for index in options.input_grad_argnums:
        if not (0 <= index < len(request.args)) or not _differentiable(request.args[index]):
            raise BackendUnsupportedError(
                f"input_grad_argnums names argument {index}, which is not a floating torch.Tensor",
                "option_unsupported",
                "name positional arguments that are floating torch.Tensor inputs",
                framework="torch",
            )


def _differentiable(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def derive(trace: Any, request: Any, adapter: Any) -> Autograd:
    """Leaf (and optionally per-op) derived gradients of ``request``'s loss for ``trace``."""
    options: GradOptions = request.options.grad_options
    model = request.model
    floating_ops = [op for op in trace.ops if op.kind == "compute" and _floating(op.dtype)]
    if options.intermediate_grads:
        check_intermediate_cap(len(floating_ops), options.max_intermediate_grads)
    args = list(request.args)
    copies: Dict[int, torch.Tensor] = {}
    for index in options.input_grad_argnums:
        copies[index] = args[index].detach().clone().requires_grad_(True)
        args[index] = copies[index]
    named = dict(model.named_parameters()) if isinstance(model, torch.nn.Module) else {}
    params = [
        (f"params.{address}", named[address])
        for address in trace.params
        if address in named and named[address].requires_grad and _differentiable(named[address])
    ]
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
            auxiliary = adapter.capture(auxiliary_request)
            output = auxiliary.output
            _check_same_output(trace, output, adapter)
            loss = _loss(options, output)
            targets = [value for _, value in params] + list(copies.values())
            grads = torch.autograd.grad(loss, targets, allow_unused=True) if targets else ()
            # An unused leaf has a zero gradient (as the other backends report it).
            grads = [
                torch.zeros_like(target) if grad is None else grad for target, grad in zip(targets, grads)
            ]
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                if buffer.shape == saved.shape:
                    buffer.copy_(saved)
    names = [name for name, _ in params] + [f"inputs.{index}" for index in copies]
    autograd = Autograd({name: grad.detach() for name, grad in zip(names, grads)})
    if options.intermediate_grads:
        _intermediate(trace, auxiliary, floating_ops, autograd)
    return autograd


def _check_same_output(trace: Any, output: Any, adapter: Any) -> None:
    """The auxiliary forward's output equals the captured one (``trace.output``, which every
    torch capture keeps)."""
    got = [tensor for _, tensor in flatten(output, "")]
    expected = [tensor for _, tensor in flatten(trace.output, "")]
    if len(got) != len(expected) or not all(
        values_match(adapter, new.detach(), old.detach(), name_of(old.dtype))
        for new, old in zip(got, expected)
    ):
        raise CaptureError(
            "the auxiliary forward of the derived gradients does not reproduce the captured output",
            "derived_grad_replay_diverged",
            "make the forward deterministic (no Python-side state that changes between calls), "
            "then trace again",
        )


def _intermediate(trace: Any, auxiliary: Any, floating_ops: List[Any], autograd: Autograd) -> None:
    """Per-op records: the auxiliary trace's gradient of each op, where the auxiliary forward is
    an exact structural match of the capture (same labels, functions, shapes, parents)."""
    signature = [(op.label, op.func_name, op.shape, [p.label for p in op.parents]) for op in trace.ops]
    replayed = [(op.label, op.func_name, op.shape, [p.label for p in op.parents]) for op in auxiliary.ops]
    if signature != replayed:
        mark_unavailable(
            autograd, INTERMEDIATE_REPLAY_DIVERGED, "the auxiliary forward ran a different graph"
        )
        return
    exposed: Dict[str, Any] = {}
    for op in floating_ops:
        grad = auxiliary.ops[op.index].grad
        if grad is not None:
            exposed[op.label] = DerivedGrad(grad, "exact", ("structural_match", "torch_autograd"))
    autograd.intermediate_derived_grads = exposed


__all__ = ["GradOptions", "derive"]
