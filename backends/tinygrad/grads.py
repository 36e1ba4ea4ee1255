"""Derived gradients of a tinygrad trace: bracketed leaf gradients of a loss through tinygrad's
own autodiff, and optionally per-op gradients. These are not a captured backward pass
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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tinygrad import Tensor, dtypes

from torchlens.adapter_kit.derived_grads import check_intermediate_cap, mark_unavailable
from torchlens.adapter_kit.replay import values_match
from torchlens.adapter_kit.wrappers import Patches
from torchlens.trace import Autograd, DerivedGrad

from .refusals import refuse

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"
INTERMEDIATE_REPLAY_FAILED = "intermediate_replay_failed"


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar Tensor`` (default: the sum of every
    output Tensor), which positional inputs get gradients (``input_grad_argnums``), and whether
    to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _leaves(output: Any) -> List[Any]:
    from .adapter import output_pairs

    return [tensor for _, tensor in output_pairs(output)]


def _loss(options: GradOptions, output: Any) -> Any:
    if options.loss_fn is not None:
        return options.loss_fn(output)
    total = None
    for leaf in _leaves(output):
        part = leaf.float().sum()
        total = part if total is None else total + part
    return total


def _floating(tensor: Any) -> bool:
    return isinstance(tensor, Tensor) and dtypes.is_float(tensor.dtype)


def _realize(tensors: List[Any]) -> None:
    if tensors:
        Tensor.realize(tensors[0], *tensors[1:])


class _Bracket:
    """Saves ``.grad`` of tensors and restores it on exit."""

    def __init__(self, tensors: Sequence[Any]) -> None:
        self.saved = [(tensor, tensor.grad) for tensor in tensors]

    def __enter__(self) -> _Bracket:
        return self

    def __exit__(self, *exc: Any) -> None:
        for tensor, grad in self.saved:
            tensor.grad = grad


def derive(trace: Any, options: GradOptions) -> Autograd:
    """The derived gradients of a live trace (``CaptureOptions(grad_options=...)``)."""
    runtime = trace._runtime
    args, kwargs = runtime.args, runtime.kwargs
    params = [(address, tensor) for address, _, tensor in runtime.tree.params if _floating(tensor)]
    chosen: List[Tuple[str, Any]] = []
    for position in options.input_grad_argnums:
        if position >= len(args) or not isinstance(args[position], Tensor):
            raise refuse(
                f"input_grad_argnums names position {position}, which is not a tinygrad Tensor argument",
                "option_value_invalid",
                "name the positions of floating Tensor inputs, for example input_grad_argnums=(0,)",
            )
        if _floating(args[position]):
            chosen.append((f"inputs.{position}", args[position]))
    targets = params + chosen
    with _Bracket([tensor for _, tensor in targets]):
        loss = _loss(options, runtime.model(*args, **kwargs))
        if not isinstance(loss, Tensor) or loss.shape != ():
            raise refuse(
                "the loss must be a scalar tinygrad Tensor",
                "option_value_invalid",
                "pass GradOptions(loss_fn=lambda output: output.sum())",
            )
        grads = loss.gradient(*[tensor for _, tensor in targets]) if targets else []
        _realize(list(grads))
    autograd = Autograd(
        {
            f"params.{name}" if not name.startswith("inputs.") else name: grad
            for (name, _), grad in zip(targets, grads)
        }
    )
    if options.intermediate_grads:
        _intermediate(trace, options, autograd)
    return autograd


class _ShadowSession:
    """Stands in for the capture session in the per-op pass: it hands out ids and remembers each
    op's signature, and sends nothing to the core."""

    def __init__(self) -> None:
        self._next = 1
        self.ops: List[Tuple[int, str, tuple, List[int]]] = []

    def new_value_id(self) -> int:
        value_id = self._next
        self._next += 1
        return value_id

    def op(self, func: str, parents: list, outputs: list, **_: Any) -> None:
        for value_id, _value, shape, _dtype in outputs:
            self.ops.append((value_id, func, tuple(shape), [parent for parent, _ in parents]))

    def param(self, *args: Any) -> None:
        pass

    def input(self, *args: Any) -> None:
        pass

    def constant(self, *args: Any) -> None:
        pass


def _intermediate(trace: Any, options: GradOptions, autograd: Autograd) -> None:
    from .adapter import input_pairs
    from .capture import Recorder

    runtime = trace._runtime
    captured = [op for op in trace.ops if op.kind in ("compute", "literal_producer")]
    floating = [op for op in captured if op.dtype.startswith(("float", "bfloat"))]
    check_intermediate_cap(len(floating), options.max_intermediate_grads)
    shadow = _ShadowSession()
    recorder = Recorder(shadow)
    recorder.snapshot()
    params = [tensor for _, _, tensor in runtime.tree.params]
    for address, owner, tensor in runtime.tree.params:
        recorder.param(address, owner, tensor)
    inputs = [tensor for _, tensor in input_pairs(runtime.args, runtime.kwargs)]
    for name, tensor in input_pairs(runtime.args, runtime.kwargs):
        recorder.input(name, tensor)
    with _Bracket(params + inputs):
        try:
            with Patches() as patches:
                recorder.install(patches)
                output = runtime.model(*runtime.args, **runtime.kwargs)
            loss = _loss(options, output)
            # backward before anything copied is realized: the gradient graph is built on the
            # lazy outputs of the pass
            loss.backward()
        except Exception as error:
            mark_unavailable(autograd, INTERMEDIATE_REPLAY_FAILED, f"the gradient pass raised {error!r}")
            return
        holders = recorder.values
        # tinygrad fills .grad on the recorder's holders (they share the pass's UOps)
        grads: Dict[int, Any] = {
            value_id: holder.grad
            for value_id, holder in holders.items()
            if getattr(holder, "grad", None) is not None
        }
        outputs = _leaves(output)
        _realize(list(holders.values()) + list(grads.values()) + outputs)
    # exact, unambiguous: the same ops with the same functions, shapes and parents, in order
    signature = [(op.func_name, op.shape) for op in captured]
    replayed = [(func, shape) for _, func, shape, _ in shadow.ops]
    if signature != replayed:
        mark_unavailable(autograd, INTERMEDIATE_REPLAY_DIVERGED, "the gradient pass built a different graph")
        return
    adapter = trace._backend
    expected = [op.out for op in trace.outputs]
    if len(outputs) != len(expected) or not all(
        value is not None and values_match(adapter, got, value, op.dtype)
        for got, value, op in zip(outputs, expected, trace.outputs)
    ):
        mark_unavailable(
            autograd, INTERMEDIATE_REPLAY_DIVERGED, "the gradient pass does not reproduce the outputs"
        )
        return
    exposed: Dict[str, Any] = {}
    for op, (value_id, _, _, _) in zip(captured, shadow.ops):
        grad = grads.get(value_id)
        if grad is not None and op.dtype.startswith(("float", "bfloat")):
            exposed[op.label] = DerivedGrad(grad, "exact", ("structural_match", "tinygrad_backward"))
    autograd.intermediate_derived_grads = exposed
