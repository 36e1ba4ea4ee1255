"""Editing a finished trace: ``trace.fork()`` gives an editable copy, ``.do(...)`` runs the
model again under the fork's edit rules and returns a new trace; the original is untouched."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

from ..errors import UnsupportedError
from .rules import Intervention, interventions_of, when


class ForkedTrace:
    """An editable copy of a finished trace (``trace.fork()``). Each :meth:`do` adds rules and
    returns the trace of the model run again on the same call (or the ``model``/``x`` given)
    with every rule so far, captured with the original's options and ``save=``. The forward
    runs again from its inputs rather than replaying only the ops after the edits: that stays
    exact for models whose path depends on values, and equals a fresh intervened run."""

    def __init__(self, trace: Any, name: Optional[str] = None) -> None:
        runtime = trace._runtime
        request = getattr(runtime, "request", None) if runtime is not None else None
        if request is None:
            raise UnsupportedError(
                "this trace has no live capture to run again (it was loaded from a file, or its "
                "backend does not keep the call)",
                "fork_without_capture",
                "fork a trace captured in this process",
            )
        self.name = name
        self.source = trace
        self._request = request
        #: The edit rules of this fork, in the order they apply (the original's first).
        self.rules: Tuple[Intervention, ...] = tuple(request.interventions)

    def do(self, rule_or_site: Any, action: Any = None, *, model: Any = None, x: Any = None) -> Any:
        """Adds edits and runs them: ``do(tl.when(selector, action))``, a list of rules, or
        ``do(selector, action)``. Returns the new :class:`~torchlens.trace.Trace`; ``model``
        and ``x`` run another model object or input instead of the original call's."""
        added = interventions_of(rule_or_site) if action is None else (when(rule_or_site, action),)
        self.rules = self.rules + added
        request = dataclasses.replace(self._request, interventions=self.rules, facets=None)
        if model is not None:
            request = dataclasses.replace(request, model=model)
        if x is not None:
            request = dataclasses.replace(request, args=tuple(x) if isinstance(x, (tuple, list)) else (x,))
        return self.source._backend.capture(request)

    def __repr__(self) -> str:
        return f"<ForkedTrace of {self.source!r}: {len(self.rules)} rule(s)>"
