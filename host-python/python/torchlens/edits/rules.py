"""Edit rules (``tl.when``), the context a predicate sees, the record of a firing, and the stop
rule of ``stop_after=``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from ..argument_checks import short_repr
from ..errors import ArgumentError
from ..selectors import Selector, as_selector
from .actions import Action, as_action


@dataclass(frozen=True)
class Intervention:
    """One edit rule: where ``condition`` holds, ``action`` replaces the value. ``direction``
    is ``forward`` (the default) or ``backward``."""

    condition: Selector
    action: Action
    direction: Optional[str] = None

    def describe(self) -> str:
        """The rule as the trace's edit records name it."""
        if self.direction == "backward":
            return f"when(grad({self.condition!r}), {self.action.describe()})"
        return f"when({self.condition!r}, {self.action.describe()})"


@dataclass(frozen=True)
class GradSite:
    """The gradient site of the ops a selector matches (``tl.grad(selector)``): in
    ``tl.when(tl.grad(selector), action)`` the action replaces the gradient of those ops' outputs
    as it flows back through the user's ``loss.backward()``, instead of their forward values."""

    selector: Selector

    def __repr__(self) -> str:
        return f"grad({self.selector!r})"


def grad(selector: Any) -> GradSite:
    """The gradient site of the ops ``selector`` matches, for ``tl.when(tl.grad(selector),
    action)``: the same actions as forward edits (``tl.zero_ablate()``, ``tl.scale(k)``,
    ``tl.add(x)``, ``tl.clamp(...)``, callables ``grad -> grad``) applied to each matched op's
    output gradient during the backward pass. Needs a backend with true backward capture
    (torch); the others refuse with ``gradient_site_intervention_unsupported``."""
    return GradSite(as_selector(selector))


def when(condition: Any, action: Any, *, direction: Optional[str] = None) -> Intervention:
    """An edit rule for ``intervene=``: ``condition`` is a selector (or a callable, a
    value-dependent predicate over :class:`RecordContext`), or ``tl.grad(selector)`` for a
    gradient site (the same as ``direction="backward"``); ``action`` a tl action or a plain
    callable ``value -> value``."""
    if direction not in (None, "forward", "backward"):
        raise ArgumentError(
            f"direction must be 'forward', 'backward' or None, got {short_repr(direction)}",
            "argument_invalid",
            "leave direction unset for forward edits; tl.when(tl.grad(selector), action) edits gradients",
        )
    if isinstance(condition, GradSite):
        if direction == "forward":
            raise ArgumentError(
                "tl.grad(...) is a gradient site, so direction='forward' contradicts it",
                "argument_invalid",
                "leave direction unset with tl.grad(...)",
            )
        condition, direction = condition.selector, "backward"
    return Intervention(as_selector(condition), as_action(action), direction)


def interventions_of(intervene: Any) -> Tuple[Intervention, ...]:
    """The rules of an ``intervene=`` argument: one rule or a sequence of rules."""
    if intervene is None:
        return ()
    rules = tuple(intervene) if isinstance(intervene, (list, tuple)) else (intervene,)
    for rule in rules:
        if not isinstance(rule, Intervention):
            raise ArgumentError(
                f"intervene= takes tl.when(...) rules, got {type(rule).__name__} {short_repr(rule)}",
                "argument_invalid",
                "pass intervene=tl.when(tl.func('relu'), tl.zero_ablate()), or a list of such rules",
            )
    return rules


@dataclass(frozen=True)
class StopRule:
    """``stop_after=``: capture ends right after the first op the selector matches (inclusive);
    nothing past it runs, and the trace is marked stopped with the frontier."""

    selector: Selector

    @classmethod
    def from_argument(cls, stop_after: Any) -> Optional[StopRule]:
        """The rule for a ``stop_after=`` argument (None when absent)."""
        if stop_after is None:
            return None
        return cls(as_selector(stop_after))


@dataclass(frozen=True)
class RecordContext:
    """What a value-dependent predicate sees about one op as it runs. ``label`` is provisional
    (final labels exist only after the capture); the value fields are filled only by backends
    that hold the concrete value at that point.

    It answers the names a finished trace's :class:`~torchlens.trace.Op` answers — ``out`` (and
    ``value``), ``shape``, ``dtype``, ``func_name``, ``module``, ``module_stack``, ``label`` —
    so one ``tl.where`` predicate serves ``save=``, ``intervene=`` and ``trace.select``.
    ``module`` is the innermost module call, ``address:call`` (``"self"`` at the root), and
    ``module_stack`` every open call, innermost first, ending with ``"self"``; ``address`` is
    the innermost module's address alone."""

    kind: str
    label: str
    func_name: Optional[str] = None
    step_index: Optional[int] = None
    address: Optional[str] = None
    module_type: Optional[str] = None
    module_stack: Tuple[str, ...] = ()
    shape: Optional[Tuple[int, ...]] = None
    dtype: Optional[str] = None
    output_index: Optional[int] = None
    tensor_requires_grad: Optional[bool] = None
    is_scalar_bool: Optional[bool] = None
    bool_value: Optional[bool] = None
    parent_labels: Tuple[str, ...] = field(default_factory=tuple)
    #: The concrete output value (a framework array), where the backend holds it.
    value: Any = field(default=None, compare=False, repr=False)

    @property
    def out(self) -> Any:
        """The op's output value (``value``), by the name :attr:`Op.out` has."""
        return self.value

    @property
    def module(self) -> str:
        """The innermost module call open at the op, ``address:call`` (``"self"`` at the root)."""
        return self.module_stack[0] if self.module_stack else "self"


@dataclass(frozen=True)
class FireRecord:
    """One edit that fired, as the trace keeps it: the op it replaced (``target_label``), the
    rule, the action's name and when it fired (``timing``: ``post`` = on the op's output)."""

    target_label: str
    rule: str
    helper_name: str
    timing: str
    replaced: bool = True
