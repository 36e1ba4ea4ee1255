"""Reading what an eager call will do before it runs: the backend traces the call once into its
framework's graph without executing an op (the model's Python runs a second time, on symbolic
values), and the op types of that graph are checked against the backend's
:class:`~.op_type_refusals.OpTypeRefusals`. A call that cannot be traced (Python that needs
values) is left to the backend's fallback, which refuses as the op is called.

The verdict is kept per callable (weakly: it goes with the callable) and input signature when
the graph is clean or the call cannot be traced; a refusal is never kept, so the next capture
refuses again with its own message."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Iterable, MutableMapping

from ..errors import BackendUnsupportedError
from .op_type_refusals import OpTypeRefusals

#: What a scan of a traceable call returns.
TRACED = "graph"


class PreRunScan:
    """Scans eager calls before they run against ``refusals`` (``where`` names the check in a
    refusal's message)."""

    def __init__(self, refusals: OpTypeRefusals, where: str) -> None:
        self.refusals = refusals
        self.where = where
        #: callable → {input signature → ``"graph"`` or ``"fallback: <why>"``}.
        self._verdicts: MutableMapping[Any, Dict[str, str]] = weakref.WeakKeyDictionary()

    def verdict(self, model: Any, signature: str, trace: Callable[[], Iterable[str]]) -> str:
        """How the call of ``model`` with inputs of ``signature`` was checked: ``"graph"`` (the
        op types ``trace()`` gives are clean), or ``"fallback: <why>"`` when ``trace()`` raised
        anything but a refusal (the call cannot be traced). A draw or a write refuses."""
        try:
            cached = self._verdicts.get(model, {}).get(signature)
        except TypeError:  # not weakly referenceable (no cache)
            cached = None
        if cached is not None:
            return cached
        try:
            op_types = list(trace())
        except BackendUnsupportedError:
            raise
        except Exception as error:  # Python that cannot run on symbolic values
            verdict = f"fallback: {type(error).__name__}"
        else:
            self.refusals.check(op_types, self.where)
            verdict = TRACED
        try:
            self._verdicts.setdefault(model, {})[signature] = verdict
        except TypeError:
            pass
        return verdict
