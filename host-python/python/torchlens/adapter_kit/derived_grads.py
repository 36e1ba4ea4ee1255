"""One driver for every backend's derived gradients (``CaptureOptions(grad_options=...)``).

Derived gradients are leaf gradients of a loss, computed by the framework's own autodiff on a
rerun of the traced call, and optionally per-op gradients; they are not a captured backward pass
(``has_backward_pass`` stays False). The pipeline is the same on every backend, so it lives
here once:

1. With ``intermediate_grads=True``, refuse more floating ops than ``max_intermediate_grads``
   before anything runs (``intermediate_grads_over_cap``).
2. The leaf pass (:meth:`GradHooks.leaf_pass`): the backend reruns the call differentiably and
   builds the loss with :func:`build_loss` (the user's ``loss_fn``, or the sum of every output
   leaf's part; a non-scalar loss is refused with ``option_value_invalid``). Gradients are named
   :func:`param_target` / :func:`input_target`. Where the pass hands back its output leaves,
   they must reproduce the captured output, or the call refuses
   (``derived_grad_replay_diverged``).
3. Per-op records: from the leaf pass itself where it recorded the ops (a single-pass backend),
   or from a separate pass (:meth:`GradHooks.op_pass`). A separate pass that raises or does not
   reproduce the outputs, or any pass whose op signatures differ from the capture's, attaches
   nothing and says why in ``trace.autograd.intermediate_unavailable`` (the codes below, and a
   ``DerivedGradUnavailableWarning``). Each remaining floating op's gradient must pass the
   backend's oracle (:meth:`GradHooks.oracle`) before it is exposed as an ``exact``
   :class:`~torchlens.trace.DerivedGrad`.

A backend supplies a :class:`GradHooks` subclass (its framework calls) and, for its public
``GradOptions``, a thin subclass of :class:`GradOptions` where its fields are these four."""

from __future__ import annotations

import functools
import math
import operator
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import CaptureError, DerivedGradUnavailableWarning, LimitExceededError
from ..trace import Autograd, DerivedGrad, Trace
from .replay import values_match
from .user_frame import user_stacklevel

if TYPE_CHECKING:  # the protocol module is not needed at run time here
    from .protocol import BackendProtocol

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``): the
#: gradient pass ran a different graph, or did not reproduce the captured outputs.
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"
#: The gradient pass raised.
INTERMEDIATE_REPLAY_FAILED = "intermediate_replay_failed"
#: The framework's autodiff cannot differentiate the replayed graph.
INTERMEDIATE_GRAD_UNSUPPORTED = "intermediate_grad_unsupported"


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar`` (default: the sum of every floating
    output), which positional inputs get gradients (``input_grad_argnums``, keys
    ``inputs.<n>``; trainable parameters always do, keys ``params.<address>``), and whether to
    derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def param_target(address: str) -> str:
    """The ``derived_grads`` key of a parameter's gradient."""
    return f"params.{address}"


def input_target(position: int, suffix: str = "") -> str:
    """The ``derived_grads`` key of a positional input's gradient (``suffix``: a path inside a
    structured input, named by the path to its leaf)."""
    return f"inputs.{position}{suffix}"


def is_floating_dtype(dtype: str) -> bool:
    """Whether a neutral dtype name is floating (the only ops that get per-op gradients)."""
    return dtype.startswith(("float", "bfloat"))


@dataclass(frozen=True)
class CapturedOp:
    """One captured op as the per-op stage sees it: its label (None: not exposable), the
    signature a gradient pass must reproduce at its position, whether it is floating, and the
    backend's own key for it (a value id, an order position)."""

    label: Optional[str]
    signature: Any
    floating: bool
    key: Any = None


def captured_ops(trace: Trace, kinds: Tuple[str, ...] = ("compute", "literal_producer")) -> List[CapturedOp]:
    """The trace's ops of ``kinds``, each signed by its function and shape (what a shadow
    session records, see :meth:`ShadowSession.signature`)."""
    return [
        CapturedOp(op.label, (op.func_name, tuple(op.shape)), is_floating_dtype(op.dtype), op.index)
        for op in trace.ops
        if op.kind in kinds
    ]


@dataclass
class GradPass:
    """What one differentiable rerun gave.

    ``grads``: leaf gradients by key (None values are dropped). ``outputs``: the rerun's output
    leaves, in the order of the captured outputs, to check against them (None: this pass is not
    checked). ``replayed``: the signature of each op the rerun recorded, compared with
    :attr:`CapturedOp.signature` (None: no structural check, the pass re-evaluated the captured
    graph itself). ``op_grads``: each captured op's gradient, aligned with the captured ops
    (None: this pass gave no per-op gradients)."""

    grads: Dict[str, Any] = field(default_factory=dict)
    outputs: Optional[List[Any]] = None
    replayed: Optional[List[Any]] = None
    op_grads: Optional[List[Any]] = None


class Unavailable(Exception):
    """Raised by a per-op pass to say, with a specific code, why there are no per-op records."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class ShadowSession:
    """Stands in for the capture session while a gradient pass reruns the forward with the
    capture's recorder: it hands out ids and remembers each op's function, shape and values,
    and sends nothing to the core."""

    def __init__(self) -> None:
        self._next = 1
        #: A recorder asking which payloads the session holds finds none.
        self.payloads: Dict[int, Any] = {}
        #: (value id, function, shape, parent ids, value) of each op output, in order.
        self.ops: List[Tuple[int, str, tuple, List[int], Any]] = []

    def new_value_id(self) -> int:
        value_id = self._next
        self._next += 1
        return value_id

    def op(self, func: str, parents: list, outputs: list, *args: Any, **kwargs: Any) -> None:
        for value_id, value, shape, _dtype in outputs:
            self.ops.append((value_id, func, tuple(shape), [parent for parent, _ in parents], value))

    def op_grads(
        self, wanted: Callable[[Any], bool], grads_of: Callable[[List[Any]], Sequence[Any]]
    ) -> List[Any]:
        """Each recorded op output's gradient, aligned with :attr:`ops`: ``grads_of`` is asked
        once, for the outputs ``wanted`` keeps (the others get None)."""
        chosen = [index for index, op in enumerate(self.ops) if wanted(op[4])]
        found: List[Any] = [None] * len(self.ops)
        for index, grad in zip(chosen, grads_of([self.ops[index][4] for index in chosen]) if chosen else ()):
            found[index] = grad
        return found

    def signature(self) -> List[Tuple[str, tuple]]:
        """Each recorded op output's (function, shape), as :func:`captured_ops` signs them."""
        return [(func, shape) for _, func, shape, _, _ in self.ops]

    def __getattr__(self, name: str) -> Any:
        # Every other session event (modules, params, inputs, edits, ...) means nothing here;
        # the recorders differ in which they send, so all of them are accepted.
        if name.startswith("__"):
            raise AttributeError(name)
        return _ignore


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


class GradHooks:
    """What a backend supplies to the driver: its framework's calls. One instance serves one
    ``derive`` call (it may keep state between its passes and its oracle)."""

    #: The independent checks an exposed per-op record passed (``DerivedGrad.checks``).
    evidence: Tuple[str, ...] = ("structural_match",)
    #: What the loss must be, for the refusal of another one ("scalar <framework> tensor").
    loss_kind: str = "scalar"
    #: How to pass a valid loss.
    loss_remedy: str = "pass GradOptions(loss_fn=...) returning a scalar"

    def __init__(self, trace: Trace, options: Any, adapter: Optional[BackendProtocol] = None) -> None:
        self.trace = trace
        self.options = options
        self.adapter = adapter if adapter is not None else trace._backend

    # ---- the framework's pieces ----------------------------------------------------------------

    def refuse(self, message: str, code: str, remedy: str) -> Exception:
        """The backend's typed refusal (its protocol's :meth:`BackendProtocol.refuse`)."""
        return self.adapter.refuse(message, code, remedy)

    def output_leaves(self, output: Any) -> List[Any]:
        """The arrays of a call's output, in the captured outputs' order (the adapter's)."""
        return self.adapter.output_leaves(output)

    def loss_part(self, leaf: Any) -> Any:
        """An output leaf's part of the default loss: its sum in float32 (the adapter's cast and
        the array's ``sum``), or None for a leaf that is not floating."""
        if not is_floating_dtype(self.adapter.neutral_dtype(leaf)):
            return None
        return self.adapter.cast(leaf, "float32").sum()

    def is_scalar(self, loss: Any) -> Optional[bool]:
        """Whether ``loss`` is one framework scalar: an array of the adapter's type with one
        element; None (the framework's autodiff checks) for an adapter without an array type."""
        array_type = getattr(self.adapter, "array_type", None)
        if array_type is None:
            return None
        return isinstance(loss, array_type) and math.prod(tuple(loss.shape)) == 1

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> GradPass:
        """Reruns the call differentiably, ``loss_of(output)`` giving the loss, and returns the
        leaf gradients; with ``per_op``, a single-pass backend also records the ops and returns
        their gradients (otherwise :meth:`op_pass` runs after)."""
        raise NotImplementedError

    def op_pass(self, loss_of: Callable[[Any], Any]) -> GradPass:
        """A separate pass that gives per-op gradients (``op_grads``)."""
        raise NotImplementedError

    # ---- defaults a backend may replace --------------------------------------------------------

    def captured(self) -> List[CapturedOp]:
        """The captured ops a per-op pass is matched against."""
        return captured_ops(self.trace)

    def captured_outputs(self) -> Optional[List[Tuple[Any, str]]]:
        """The captured output values and dtypes a rerun must reproduce (None: the capture kept
        none to compare)."""
        return [(op.out, op.dtype) for op in self.trace.outputs]

    def oracle(self, index: int, op: CapturedOp, grad: Any) -> bool:
        """An independent check of one per-op gradient (no check by default: a structural
        match of the rerun is the evidence)."""
        return True


# ---- the driver ------------------------------------------------------------------------------


def derive(hooks: GradHooks) -> Autograd:
    """The derived gradients of ``hooks.trace`` (see the module docstring for the pipeline)."""
    options = hooks.options
    captured = hooks.captured() if options.intermediate_grads else []
    if options.intermediate_grads:
        check_intermediate_cap(sum(op.floating for op in captured), options.max_intermediate_grads)
    leaf = hooks.leaf_pass(functools.partial(build_loss, hooks), bool(options.intermediate_grads))
    if leaf.outputs is not None and not reproduces(hooks, leaf.outputs):
        raise CaptureError(
            "the auxiliary forward of the derived gradients does not reproduce the captured output",
            "derived_grad_replay_diverged",
            "make the forward deterministic (no Python-side state that changes between calls), "
            "then trace again",
        )
    autograd = Autograd({name: grad for name, grad in leaf.grads.items() if grad is not None})
    if options.intermediate_grads:
        attach_intermediate(hooks, autograd, captured, leaf if leaf.op_grads is not None else None)
    return autograd


def build_loss(hooks: GradHooks, output: Any) -> Any:
    """The loss of one rerun's output: the user's ``loss_fn``, or the sum of every output leaf's
    part; refused (``option_value_invalid``) unless it is one scalar."""
    loss_fn = hooks.options.loss_fn
    if loss_fn is not None:
        loss = loss_fn(output)
    else:
        parts = [part for part in map(hooks.loss_part, hooks.output_leaves(output)) if part is not None]
        loss = functools.reduce(operator.add, parts) if parts else None
    if loss is None or hooks.is_scalar(loss) is False:
        raise hooks.refuse(f"the loss must be a {hooks.loss_kind}", "option_value_invalid", hooks.loss_remedy)
    return loss


def reproduces(hooks: GradHooks, outputs: List[Any]) -> bool:
    """Whether a rerun's output leaves equal the captured outputs (within rounding)."""
    expected = hooks.captured_outputs()
    if expected is None:
        return True
    return len(outputs) == len(expected) and all(
        value is not None and values_match(hooks.adapter, got, value, dtype)
        for got, (value, dtype) in zip(outputs, expected)
    )


def attach_intermediate(
    hooks: GradHooks,
    autograd: Autograd,
    captured: Optional[List[CapturedOp]] = None,
    given: Optional[GradPass] = None,
) -> None:
    """Sets ``autograd``'s per-op records from ``given`` (a single pass's result) or from the
    backend's separate :meth:`GradHooks.op_pass`, or says why there are none."""
    if captured is None:
        captured = hooks.captured()
        check_intermediate_cap(sum(op.floating for op in captured), hooks.options.max_intermediate_grads)
    result = given
    if result is None:
        try:
            result = hooks.op_pass(functools.partial(build_loss, hooks))
        except Unavailable as why:
            mark_unavailable(autograd, why.code, why.detail)
            return
        except Exception as error:
            # Per-op records are extra: a pass the framework cannot run leaves the leaf
            # gradients standing and says why.
            mark_unavailable(autograd, INTERMEDIATE_REPLAY_FAILED, f"the gradient pass raised {error!r}")
            return
    if result.replayed is not None and [op.signature for op in captured] != list(result.replayed):
        mark_unavailable(autograd, INTERMEDIATE_REPLAY_DIVERGED, "the gradient pass ran a different graph")
        return
    if given is None and result.outputs is not None and not reproduces(hooks, result.outputs):
        mark_unavailable(
            autograd, INTERMEDIATE_REPLAY_DIVERGED, "the gradient pass does not reproduce the outputs"
        )
        return
    exposed: Dict[str, Any] = {}
    for index, (op, grad) in enumerate(zip(captured, result.op_grads or ())):
        if grad is None or not op.floating or op.label is None:
            continue
        if hooks.oracle(index, op, grad):
            exposed[op.label] = DerivedGrad(grad, "exact", hooks.evidence)
    autograd.intermediate_derived_grads = exposed


def check_intermediate_cap(count: int, cap: int) -> None:
    """Refuses to derive per-op gradients for more ops than ``max_intermediate_grads``."""
    if count > cap:
        raise LimitExceededError(
            f"{count} ops would get intermediate gradients, more than max_intermediate_grads={cap}",
            "intermediate_grads_over_cap",
            "raise GradOptions.max_intermediate_grads, or leave intermediate_grads off",
        )


def mark_unavailable(autograd: Any, code: str, detail: str) -> None:
    """Per-op gradients are absent: ``autograd.intermediate_unavailable`` gets the code and a
    ``DerivedGradUnavailableWarning`` says why (pointing at the user's line)."""
    autograd.intermediate_unavailable = code
    warnings.warn(
        f"[{code}] no per-op derived gradients: {detail}",
        DerivedGradUnavailableWarning,
        stacklevel=user_stacklevel(),
    )
