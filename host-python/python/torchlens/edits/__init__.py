"""The edit and stop vocabulary, once for every backend: ``tl.when(condition, action)``, the
actions (``tl.zero_ablate``, ``tl.scale``, ``tl.add``, ``tl.clamp``, ``tl.mean_ablate``,
``tl.replace_with``, ``tl.patch_from`` and plain callables), gradient sites (``tl.grad``), the
context a predicate sees (:class:`RecordContext`), the record of an edit that fired
(:class:`FireRecord`) and the stop rule of ``stop_after=``. They are framework-neutral data;
each backend applies an action through its one apply hook (``BackendProtocol.apply_action``)
and reports what fired to the core. ``trace.fork()`` (:mod:`.fork`) edits a finished trace."""

from .actions import (
    Action,
    CallableAction,
    add,
    as_action,
    clamp,
    mean_ablate,
    patch_from,
    replace_with,
    scale,
    zero_ablate,
)
from .rules import FireRecord, GradSite, Intervention, RecordContext, StopRule, grad, when

__all__ = [
    "Action",
    "CallableAction",
    "FireRecord",
    "GradSite",
    "Intervention",
    "RecordContext",
    "StopRule",
    "add",
    "as_action",
    "clamp",
    "grad",
    "mean_ablate",
    "patch_from",
    "replace_with",
    "scale",
    "when",
    "zero_ablate",
]
