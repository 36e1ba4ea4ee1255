"""Derived gradients of a tinygrad trace: bracketed leaf gradients of a loss through tinygrad's
own autodiff, and optionally per-op gradients, driven by the kit's driver
(:mod:`torchlens.adapter_kit.derived_grads`). These are not a captured backward pass
(``has_backward_pass`` stays False).

* Leaf gradients: the call runs again with nothing installed, ``loss.gradient(*leaves)`` gives
  the gradients of the parameters and the chosen inputs; nothing the user holds is changed
  (``.grad`` of every parameter and input is bracketed: saved before, restored after).
* Per-op gradients (``intermediate_grads=True``): a separate no-realize pass records the
  forward's tensor-visible UOps again with the capture's recorder, calls ``loss.backward()``
  before realizing any copied output, then realizes the recorded outputs and their gradients in
  one evaluation. A record is attached only when the pass is an exact, unambiguous structural
  match of the capture (same ops, functions, shapes and parents, in the same order) and its
  outputs reproduce the captured outputs; otherwise no record is attached and
  ``trace.autograd.intermediate_unavailable`` says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Sequence, Tuple

from tinygrad import Tensor

from torchlens.adapter_kit import derived_grads as kit
from torchlens.adapter_kit.capture_pipeline import shadow_run
from torchlens.adapter_kit.structures import named_arrays, named_inputs


@dataclass(frozen=True)
class GradOptions(kit.GradOptions):
    """What to differentiate: ``loss_fn(output) -> scalar Tensor`` (default: the sum of every
    output Tensor), which positional inputs get gradients (``input_grad_argnums``), and whether
    to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""


def _leaves(output: Any) -> List[Any]:
    return [tensor for _, tensor in named_arrays(output, Tensor, "output")]


class _Bracket:
    """Saves ``.grad`` of tensors and restores it on exit."""

    def __init__(self, tensors: Sequence[Any]) -> None:
        self.saved = [(tensor, tensor.grad) for tensor in tensors]

    def __enter__(self) -> _Bracket:
        return self

    def __exit__(self, *exc: Any) -> None:
        for tensor, grad in self.saved:
            tensor.grad = grad


class GradHooks(kit.GradHooks):
    """tinygrad's value-and-grad for the kit's gradient driver."""

    evidence = ("structural_match", "tinygrad_backward")
    loss_kind = "scalar tinygrad Tensor"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: output.sum())"

    def is_scalar(self, loss: Any) -> bool:
        return isinstance(loss, Tensor) and loss.shape == ()

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> kit.GradPass:
        """The call again with nothing installed (leaf gradients only; per-op gradients come
        from :meth:`op_pass`)."""
        runtime = self.trace._runtime
        args = runtime.args
        targets: List[Tuple[str, Any]] = [
            (kit.param_target(address), tensor)
            for address, _, tensor, _ in runtime.tree.params
            if self.adapter.differentiable_input(tensor)
        ]
        for position in self.options.input_grad_argnums:
            if self.adapter.differentiable_input(args[position]):
                targets.append((kit.input_target(position), args[position]))
        with _Bracket([tensor for _, tensor in targets]):
            loss = loss_of(runtime.model(*args, **runtime.kwargs))
            grads = loss.gradient(*[tensor for _, tensor in targets]) if targets else []
            self.adapter.realize(list(grads))
        return kit.GradPass(grads={name: grad for (name, _), grad in zip(targets, grads)})

    def op_pass(self, loss_of: Callable[[Any], Any]) -> kit.GradPass:
        """A no-realize pass: the capture's own hooks on a shadow session, ``loss.backward()``
        before anything copied is realized, then one realization of every recorded output and
        gradient."""
        runtime = self.trace._runtime
        params = [tensor for _, _, tensor, _ in runtime.tree.params]
        inputs = [tensor for _, tensor in named_inputs(runtime.args, runtime.kwargs, Tensor)]
        with _Bracket(params + inputs):
            shadow, recorder, output = shadow_run(self.adapter, self.trace, runtime.args, runtime.kwargs)
            # backward before anything copied is realized: the gradient graph is built on the
            # lazy outputs of the pass
            loss_of(output).backward()
            # tinygrad fills .grad on the recorder's holders (they share the pass's UOps)
            grads: Dict[int, Any] = {
                value_id: holder.grad
                for value_id, holder in recorder.values.items()
                if getattr(holder, "grad", None) is not None
            }
            outputs = _leaves(output)
            self.adapter.realize(list(recorder.values.values()) + list(grads.values()) + outputs)
        return kit.GradPass(
            outputs=outputs,
            replayed=shadow.signature(),
            op_grads=[grads.get(op[0]) for op in shadow.ops],
        )
