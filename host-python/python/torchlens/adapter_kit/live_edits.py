"""Live edits and early stop, shared by the adapters that run them: the ``intervene=`` rules and
the ``stop_after=`` rule are decided on each concrete op output as it leaves its op (before the
caller sees it) and at each module call's exit (``tl.module`` terms).

A rule that matches replaces the value: the replacement flows downstream, keeps the op's
identity (its value id, so its label) and becomes its payload, and the session records an edit.
A matching stop rule marks the frontier and raises :class:`StopSignal`, so nothing past it runs.
Every rule is checked before the model runs.

The adapter supplies a :class:`LiveEditHost` (how its recorder pauses, adopts a replacement and
describes a value) and its protocol's ``apply_action``; everything else is here."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import selectors
from ..edits.actions import Action, CallableAction, PatchFrom, _shape_kept
from ..edits.rules import RecordContext
from ..errors import PatchError, UnsupportedError
from .replay import replay_edits


class StopSignal(BaseException):
    """Raised inside the forward at the ``stop_after=`` frontier, so nothing past it runs. A
    ``BaseException``: a model's own ``except Exception`` must not swallow it."""


class LiveEditHost:
    """What an adapter's recorder provides to :class:`LiveEdits`."""

    #: The last error an edit raised inside the forward: where the framework re-raises what a
    #: call raised as another type (a layer library may wrap what a layer's call raised), the kit's pipeline
    #: raises this one (:meth:`~.capture_pipeline.CaptureHooks.call`).
    error: Optional[BaseException] = None

    def quiet(self) -> contextlib.AbstractContextManager:
        """A block in which framework calls the edits make themselves are not recorded."""
        raise NotImplementedError

    def adopt(self, value_id: int, value: Any) -> None:
        """``value`` replaces the value ``value_id``: it carries the id, is its payload and
        what replay reads."""
        raise NotImplementedError

    def module_stack(self) -> List[str]:
        """The module calls open now, ``address:call``, outermost first (the root excluded):
        :meth:`~.session.SharedSession.open_module_calls`."""
        raise NotImplementedError

    def value_facts(self, value: Any) -> Dict[str, Any]:
        """The :class:`RecordContext` fields read from a concrete value: ``shape``, ``dtype``,
        ``tensor_requires_grad``, ``is_scalar_bool``, ``bool_value``."""
        raise NotImplementedError

    def is_value(self, value: Any) -> bool:
        """Whether ``value`` is one of the framework's arrays."""
        raise NotImplementedError

    def same_dtype(self, new: Any, like: Any) -> Any:
        """``new`` in ``like``'s dtype (a replacement keeps the value's dtype)."""
        raise NotImplementedError

    def copy(self, value: Any) -> Any:
        """A copy of ``value`` (a replacement must be a new object)."""
        raise NotImplementedError


def selector_kinds(selector: Any, found: Optional[set] = None) -> set:
    """The leaf kinds of a selector tree (``func``, ``module``, ``where``, ``temporal``,
    ``downstream_of``...); ``&`` and ``~`` are listed when present. An influence term lists its
    seed's kinds too (a seed decided at a call's exit or by a predicate shapes how the term can
    be decided)."""
    found = set() if found is None else found
    if isinstance(selector, selectors._Leaf):
        found.add(selector.kind)
    elif isinstance(selector, selectors._Composite):
        for part in selector.parts:
            selector_kinds(part, found)
        if selector.kind == "and":
            found.add("&")
    elif isinstance(selector, selectors._Not):
        found.add("~")
        selector_kinds(selector.inner, found)
    elif isinstance(selector, selectors._Where):
        found.add("where")
    elif isinstance(selector, selectors._Temporal):
        found.add("temporal")
        found.add(selector.kind)
    elif isinstance(selector, selectors._Influence):
        found.add(selector.kind)
        selector_kinds(selector.seed, found)
    return found


#: ``refuse(message, code, remedy)``: the backend's typed refusal.
Refuse = Callable[[str, str, str], Exception]


class LiveCondition:
    """One selector of a rule, decided op by op: static subtrees by the core's live rules
    (``session.rule``), ``tl.where`` predicates on the concrete value's :class:`RecordContext`.
    A selector made only of ``tl.module`` terms (a union of them) is decided at the call's exit.
    ``tl.preceded_by`` is decided at the op (it looks back); ``tl.followed_by`` refuses, since a
    value cannot be edited or stopped at after later ops have used it."""

    def __init__(
        self, selector: Any, session: Any, what: str, refuse: Refuse, look_back: bool = True
    ) -> None:
        self.at_exit_only = "module" in self.check(selector, what, refuse, look_back)
        self.selector = selector
        self.session = session
        self._rules: Dict[int, Any] = {}
        self._compile(selector)

    @staticmethod
    def check(selector: Any, what: str, refuse: Refuse, look_back: bool = True) -> set:
        """Refuses a selector that cannot be decided op by op (before any capture starts);
        returns its kinds."""
        kinds = selector_kinds(selector)
        if "preceded_by" in kinds and not look_back:
            raise refuse(
                f"{what} with tl.preceded_by needs a look-back window this backend does not keep",
                "followed_by_unsupported",
                "select the op itself (tl.func, tl.label, tl.module)",
            )
        if "followed_by" in kinds:
            raise refuse(
                f"{what} with tl.followed_by would have to act on an op after later ops used its value",
                "followed_by_unsupported",
                "select the later op, or use tl.preceded_by (it looks back)",
            )
        if "temporal" in kinds and "where" in kinds:
            raise refuse(
                f"{what} mixes tl.preceded_by with tl.where; the look-back is decided by the core, "
                "the predicate on the value here",
                "followed_by_unsupported",
                "use two rules, or a callable that checks both",
            )
        if "module" in kinds and kinds - {"module"}:
            raise refuse(
                f"{what} mixes tl.module(...) with another selector kind; a module term is decided "
                "at the call's exit, the others at the op",
                "mixed_module_selector",
                "use tl.module terms alone (a union of them works), or tl.in_module(...) with the others",
            )
        return kinds

    def _compile(self, selector: Any) -> None:
        if "where" not in selector_kinds(selector) or isinstance(selector, selectors._Influence):
            # An influence term is the core's to decide whole (it refuses a predicate seed).
            self._rules[id(selector)] = self.session.rule(selector)
            return
        if isinstance(selector, selectors._Composite):
            for part in selector.parts:
                self._compile(part)
        elif isinstance(selector, selectors._Not):
            self._compile(selector.inner)

    def at_op(self, func: str, value_id: int, context: Callable[[], RecordContext]) -> bool:
        """Whether the selector matches the op that just produced ``value_id``."""
        return bool(self._decide(self.selector, func, value_id, context))

    def _decide(self, selector: Any, func: str, value_id: int, context: Callable[[], RecordContext]) -> bool:
        rule = self._rules.get(id(selector))
        if rule is not None:
            return bool(rule.at_op(func, value_id))
        if isinstance(selector, selectors._Where):
            return bool(selector.predicate(context()))
        if isinstance(selector, selectors._Not):
            return not self._decide(selector.inner, func, value_id, context)
        parts = selector.parts
        if selector.kind == "and":
            return all(self._decide(part, func, value_id, context) for part in parts)
        return any(self._decide(part, func, value_id, context) for part in parts)

    def at_exit(self, value_ids: Sequence[int]) -> List[int]:
        """The outputs of the call that just exited that the (module-only) selector matches."""
        return self._rules[id(self.selector)].at_exit(value_ids)


class ContextBoundAction(Action):
    """An action that read the op's :class:`RecordContext` when it fired (a callable taking
    ``ctx``, ``tl.patch_from``), bound to that context so replay re-applies it exactly."""

    def __init__(self, action: Action, context: RecordContext) -> None:
        self.action = action
        self.context = context
        self.name = action.name

    def describe(self) -> str:
        return self.action.describe()

    def apply(self, value: Any, backend: Any, context: Optional[RecordContext] = None) -> Any:
        return self.action.apply(value, backend, self.context)


class LiveEdits:
    """``intervene=`` and ``stop_after=`` on one capture. Create it before the capture starts (it
    checks every rule), :meth:`attach` it once the modules are declared, then call
    :meth:`on_output` for each op output and :meth:`on_exit` at each module call's exit."""

    def __init__(
        self,
        request: Any,
        adapter: Any,
        refuse: Optional[Refuse] = None,
        supported_actions: Optional[Tuple[type, ...]] = None,
        framework: str = "",
    ) -> None:
        self.adapter = adapter
        self.request = request
        refuse_with: Refuse = refuse if refuse is not None else adapter.refuse
        self.refuse = refuse_with
        framework = framework or adapter.name
        for rule in request.interventions:
            if rule.direction == "backward":
                raise refuse_with(
                    "gradient-site interventions (direction='backward') need a captured backward pass",
                    "gradient_site_intervention_unsupported",
                    "edit forward values (leave direction unset)",
                )
            if supported_actions is not None and not isinstance(rule.action, supported_actions):
                helpers = [f"tl.{kind.name}" for kind in supported_actions if kind is not CallableAction]
                raise refuse_with(
                    f"the {rule.action.describe()} helper has no {framework} implementation",
                    "edit_action_unsupported",
                    f"use {', '.join(helpers)} or a callable",
                )
        # Every selector is checked now, before any capture starts (compiled at :meth:`attach`).
        self.look_back = bool(request.spec.capabilities.get("temporal_selectors", False))
        for selector, what in self._selectors():
            LiveCondition.check(selector, what, refuse_with, self.look_back)
        self.host: Optional[LiveEditHost] = None
        self.session: Any = None
        self.rules: List[Tuple[Any, LiveCondition]] = []
        self.stop: Optional[LiveCondition] = None
        #: A value-dependent ``save=``, decided on each (edited) value.
        self.save: Optional[LiveCondition] = None
        #: Value id → (the actions applied, the value before the first edit): what replay checks.
        self.fired: Dict[int, Tuple[Tuple[Any, ...], Any]] = {}
        #: Computed values seen so far (a value's ``step_index`` and patching site).
        self.steps = 0
        self._fired_at_exit: set = set()
        #: Whether any rule is decided at the op (else ``on_output`` is a counter).
        self._at_op = False

    @staticmethod
    def wanted(request: Any) -> bool:
        """Whether a request needs live decisions on values: edit rules, a stop rule, or a
        value-dependent ``save=``."""
        return bool(request.interventions) or request.stop_after is not None or request.save.value_dependent

    def _selectors(self) -> List[Tuple[Any, str]]:
        """``(selector, what)`` of every rule: the edits', the stop rule's and a value-dependent
        ``save=``."""
        request = self.request
        found = [(rule.condition, "intervene=") for rule in request.interventions]
        if request.stop_after is not None:
            found.append((request.stop_after.selector, "stop_after="))
        if request.save.value_dependent:
            found.append((request.save.selector, "save="))
        return found

    @property
    def attached(self) -> LiveEditHost:
        """The recorder :meth:`attach` gave: the edits act only during a capture."""
        if self.host is None:
            raise RuntimeError("live edits act only during a capture: attach() them to its recorder first")
        return self.host

    def attach(self, session: Any, host: LiveEditHost, patches: Any = None) -> None:
        """Compiles the rules against the declared modules (``patches``: where an edits type
        that wraps framework functions installs them)."""
        self.session, self.host = session, host

        def condition(selector: Any, what: str) -> LiveCondition:
            # Look-back terms need the backend's temporal selectors (the gate checks save=).
            return LiveCondition(selector, session, what, self.refuse, self.look_back)

        for rule in self.request.interventions:
            self.rules.append((rule, condition(rule.condition, "intervene=")))
        if self.request.stop_after is not None:
            self.stop = condition(self.request.stop_after.selector, "stop_after=")
        if self.request.save.value_dependent:
            self.save = condition(self.request.save.selector, "save=")
        conditions = [condition for _, condition in self.rules]
        conditions += [condition for condition in (self.stop, self.save) if condition is not None]
        self._at_op = any(not condition.at_exit_only for condition in conditions)

    # ---- at the op -------------------------------------------------------------------------------

    def context(self, func: str, value: Any, output_index: int, step: int) -> Callable[[], RecordContext]:
        """The :class:`RecordContext` of one op output, built only when a predicate asks."""
        host = self.attached
        built: List[RecordContext] = []

        def build() -> RecordContext:
            if not built:
                with host.quiet():
                    facts = host.value_facts(value)
                # Innermost first and ending with the root, as an op's module_stack reads.
                calls = tuple(reversed(host.module_stack())) + ("self",)
                built.append(
                    RecordContext(
                        kind="compute",
                        label=f"{func}_{step}",
                        func_name=func,
                        step_index=step,
                        address=calls[0].rsplit(":", 1)[0],
                        module_stack=calls,
                        output_index=output_index,
                        value=value,
                        **facts,
                    )
                )
            return built[0]

        return build

    def on_output(self, func: str, value_id: int, value: Any, output_index: int = 0) -> Any:
        """An op output, reported to the session already: returns what flows on (the value, or
        its replacement); raises :class:`StopSignal` at the stop frontier."""
        self.steps += 1
        if not self._at_op:
            return value
        step = self.steps
        current = value
        context = self.context(func, current, output_index, step)
        for rule, condition in self.rules:
            if not condition.at_exit_only and condition.at_op(func, value_id, context):
                current = self._fire_at_op(rule, func, value_id, current, context)
                # Later rules (and save=) see the edited value.
                context = self.context(func, current, output_index, step)
        if self.save is not None:
            self.session.decide_value(value_id, self.save.at_op(func, value_id, context))
        stop = self.stop
        if stop is not None and not stop.at_exit_only and stop.at_op(func, value_id, context):
            self._stop([value_id])
        return current

    def on_exit(self, module_id: int, value_ids: Sequence[int], values: Sequence[Any]) -> Dict[int, Any]:
        """A module call returned (reported to the session already): ``tl.module`` rules fire
        once here. Returns the replacements by value id."""
        replaced: Dict[int, Any] = {}
        by_id = dict(zip(value_ids, values))
        for index, (rule, condition) in enumerate(self.rules):
            if not condition.at_exit_only:
                continue
            for value_id in condition.at_exit(value_ids):
                if (index, value_id) in self._fired_at_exit:
                    continue  # an enclosing call returns the same value: it fired already
                self._fired_at_exit.add((index, value_id))
                value = replaced.get(value_id, by_id[value_id])
                context = self.context("module_output", value, 0, self.steps)
                replaced[value_id] = self._fire(rule, value_id, value, context)
        if self.stop is not None and self.stop.at_exit_only:
            matched = self.stop.at_exit(value_ids)
            if matched:
                self._stop(matched)
        return replaced

    def _fire_at_op(
        self, rule: Any, func: str, value_id: int, value: Any, context: Callable[[], RecordContext]
    ) -> Any:
        """A rule matched an op output: its replacement (fired now, where the op is
        interceptable)."""
        return self._fire(rule, value_id, value, context)

    def _fire(self, rule: Any, value_id: int, value: Any, context: Callable[[], RecordContext]) -> Any:
        try:
            return self._replace(rule, value_id, value, context)
        except Exception as error:
            self.attached.error = error  # raised inside the forward: see LiveEditHost.error
            raise

    def _replace(self, rule: Any, value_id: int, value: Any, context: Callable[[], RecordContext]) -> Any:
        host = self.attached
        action = rule.action
        if getattr(action, "needs_context", False):
            action = ContextBoundAction(action, context())
        with host.quiet():
            new = self.adapter.apply_action(action, value)
            if not host.is_value(new):
                raise TypeError(
                    f"{action.describe()} returned {type(new).__name__}, not an array of the model"
                )
            _shape_kept(action.describe(), value, new)
            if isinstance(rule.action, CallableAction) and new.dtype != value.dtype:
                raise UnsupportedError(
                    f"{action.describe()} returned {new.dtype}, the value is {value.dtype}",
                    "edit_dtype_changed",
                    "return a value of the same dtype (cast it with the framework's .to/.astype)",
                )
            new = host.same_dtype(new, value)  # the built-in actions keep the dtype by definition
            if new is value:
                new = host.copy(value)
        host.adopt(value_id, new)
        previous = self.fired.get(value_id)
        original = previous[1] if previous is not None else value
        actions = (previous[0] if previous is not None else ()) + (action,)
        self.fired[value_id] = (actions, original)
        self.session.edit(value_id, rule.describe(), action.describe(), "post")
        return new

    def _stop(self, frontier: List[int]) -> None:
        self.session.mark_stopped("stop_after", frontier)
        raise StopSignal()

    # ---- after the forward ------------------------------------------------------------------------

    def finish_stopped(self, session: Any, signal: BaseException) -> None:
        """The forward ended at the ``stop_after=`` frontier: there are no outputs to report."""

    def prepare_runtime(
        self,
        runtime: Any,
        apply: Optional[Callable[[Any, Any, Any], Any]] = None,
        output_of: Optional[Callable[[Any, Any], Any]] = None,
    ) -> None:
        """Replay of an edited op re-applies its declared actions (the kit's ``replay_edits``):
        through ``apply(adapter, action, value)`` (default: the adapter's ``apply_action``), on
        ``output_of(result, output index)`` (default: the adapter's ``output_at``)."""
        adapter = self.adapter
        replay_edits(runtime, self.fired, adapter, apply or _apply_action, output_of or adapter.output_at)


def _apply_action(adapter: Any, action: Any, value: Any) -> Any:
    return adapter.apply_action(action, value)


def check_patched_sites(trace: Any, edits: LiveEdits) -> None:
    """After the capture: every op ``tl.patch_from`` patched must carry the label its source
    op has (sites pair up by their place in the run; a different label means the runs took
    different paths, and the patch is refused instead of kept)."""
    by_value = None
    for value_id, (actions, _) in edits.fired.items():
        for action in actions:
            if not isinstance(action, ContextBoundAction) or not isinstance(action.action, PatchFrom):
                continue
            if by_value is None:
                by_value = {op._info.get("value"): op for op in trace.ops if op.kind != "output"}
            op = by_value.get(value_id)
            source = action.action.source_op(action.context)
            if op is None or op.label != source.label:
                raise PatchError(
                    f"the op patched from {source.label} is labelled "
                    f"{op.label if op is not None else 'nothing'} in this run",
                    "patch_site_missing",
                    "patch from a trace of the same model with the same control flow",
                )
