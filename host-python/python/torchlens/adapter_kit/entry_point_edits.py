"""Live edits for a framework whose op interception is read-only: it sees each op's outputs only
after the caller has them (an op callback that ignores a
returned replacement). Values are replaced where Python still holds them:

* ``tl.module`` / ``tl.in_module`` rules at each module call's exit, as :class:`LiveEdits` does;
* op-level rules (``tl.func``, ``tl.label``...) at the return of wrapped framework entry points
  (the backend names them): an op a rule matched is replaced when it is the result of the entry
  point running around it.

A rule that matches an op no wrapped entry point returns (an op outside them, or one inside an
entry point that is not its result) refuses with the backend's unreachable code, rather than
silently not editing. A value-dependent rule (``tl.where``) refuses before the model runs: which
ops it matches, and so whether each is reachable, is known only as they run."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Tuple

from ..edits.rules import RecordContext
from .live_edits import LiveEdits, selector_kinds
from .recorder import Recorder


class EntryPointEdits(LiveEdits):
    """:class:`LiveEdits` over read-only op interception. ``entry_points()`` gives the
    ``(owner, attribute)`` of each framework function to wrap for the capture;
    ``unreachable_code`` is the backend's refusal code for a rule no entry point can serve. The
    host must be a :class:`~torchlens.adapter_kit.recorder.Recorder`, whose op interception
    calls ``on_output`` for each output and ignores what it returns."""

    def __init__(
        self,
        request: Any,
        adapter: Any,
        *,
        entry_points: Callable[[], Iterable[Tuple[Any, str]]],
        unreachable_code: str,
        **options: Any,
    ) -> None:
        super().__init__(request, adapter, **options)
        for rule in request.interventions:
            if "where" in selector_kinds(rule.condition):
                raise self.refuse(
                    f"value-dependent conditions (tl.where) are not served on {adapter.name}: its ops "
                    "are edited at wrapped entry points, which only static selectors can be held to",
                    "value_dependent_predicate",
                    "use static selectors (tl.func, tl.label, tl.module, tl.in_module)",
                )
        self.entry_points = entry_points
        self.unreachable_code = unreachable_code
        #: Wrapped entry points running now.
        self.entry_depth = 0
        #: Value id → (function, step, rules matched): op outputs a rule matched inside a
        #: running entry point, replaced when it returns them.
        self.pending: Dict[int, Tuple[str, int, List[Any]]] = {}
        self._names: List[str] = []

    def attach(self, session: Any, host: Any, patches: Any = None) -> None:
        super().attach(session, host, patches)
        if not any(not condition.at_exit_only for _rule, condition in self.rules):
            return  # only module rules: nothing to wrap
        for owner, name in self.entry_points():
            patches.wrap(owner, name, self._entry_wrapper)
            self._names.append(name)

    def _fire_at_op(
        self, rule: Any, func: str, value_id: int, value: Any, context: Callable[[], RecordContext]
    ) -> Any:
        if not self.entry_depth:
            raise self._unreachable(
                f"an intervene= rule matches {func} (a {self.adapter.name} op whose call did not pass "
                "through a wrapped entry point), so it cannot be replaced",
                "select a module output (tl.module / tl.in_module) or an op reached through a wrapped "
                f"entry point ({', '.join(sorted(set(self._names)))})",
            )
        self.pending.setdefault(value_id, (func, self.steps, []))[2].append(rule)
        return value

    def _recorder(self) -> Recorder:
        """The kit recorder the edits were attached to (entry points need its depth and ids)."""
        host = self.attached
        if not isinstance(host, Recorder):
            raise TypeError("entry-point edits need the kit's Recorder as their host")
        return host

    def _unreachable(self, message: str, remedy: str) -> Exception:
        error = self.refuse(message, self.unreachable_code, remedy)
        self.attached.error = error
        return error

    def _entry_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        edits, host = self, self._recorder()

        def entry(*args: Any, **kwargs: Any) -> Any:
            if host.depth:  # the capture's own calls (the wrapper acts on the owner thread only)
                return original(*args, **kwargs)
            before = set(edits.pending)
            edits.entry_depth += 1
            try:
                out = original(*args, **kwargs)
            finally:
                edits.entry_depth -= 1
            value_id = host.known_id(out) if host.is_value(out) else None
            if value_id is not None and value_id not in before and value_id in edits.pending:
                out = edits._fire_pending(value_id, out)
            if not edits.entry_depth and set(edits.pending) - before:
                raise edits._unreachable(
                    "an intervene= rule matches an op inside a wrapped entry point that is not its "
                    "result, so it cannot be replaced",
                    "select the entry point's result (its function name) or a module output",
                )
            return out

        return entry

    def _fire_pending(self, value_id: int, value: Any) -> Any:
        """The entry point returned an op output rules matched (its one result, so output 0):
        they fire now, in order."""
        func, step, rules = self.pending.pop(value_id)
        for rule in rules:
            value = self._fire(rule, value_id, value, self.context(func, value, 0, step))
        return value
