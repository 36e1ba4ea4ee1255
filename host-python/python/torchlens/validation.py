"""Validation status: the core folds per-op replay decisions into one status."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ._core import core

FINAL_STATES = ("passed", "failed")

#: Decision reasons of a region replay cannot check per op: an effect region (a stateful op, a
#: control-flow op, a ``Model.predict`` loop). Every other not-replayable decision is a pure op
#: left unverified (no saved payload, no perturbable parent, an unresolved producer).
EFFECT_REGION_REASONS = frozenset({"opaque_region", "control_flow_region", "predict_loop_region"})

#: The reason of an op that reads a value no recorded op, input or constant produced.
UNRESOLVED_PRODUCER = "unresolved_producer"


class ValidationStatus:
    """The outcome of replay validation. ``bool()`` is True for passed, False for failed, and
    raises ``TypeError`` for the non-final states (``unverified``, ``unavailable``,
    ``available``): branch on ``.state`` or ``.passed`` there. ``replayed`` counts the ops
    re-run, of which ``perturbation_proven`` were shown to depend on their parents and
    ``value_independent`` need not; ``unverified_ops`` names the ops it could not prove."""

    def __init__(self, status: dict, decisions: List[Tuple[int, str, str]], labels: List[str]) -> None:
        self.state: str = status["state"]
        self.reason: Optional[str] = status["reason"]
        self.replayed: int = status["replayed"]
        self.failed: int = status["failed"]
        self.not_replayable: int = status["not_replayable"]
        first = status["first_failed_op"]
        self.first_failed_op: Optional[str] = labels[first] if first is not None else None
        #: Per-op decisions: ``(label, outcome, reason)``.
        self.decisions = [(labels[op], outcome, reason) for op, outcome, reason in decisions]
        #: Ops proven by replay and a perturbation that moved them.
        self.perturbation_proven: int = sum(
            1 for _, outcome, reason in decisions if outcome == "passed" and reason == "replay_matched"
        )
        #: Ops whose output ignores input values, checked by replay alone.
        self.value_independent: int = sum(
            1 for _, _, reason in decisions if reason == "value_independent_replay"
        )
        #: ``(label, reason)`` of every op validation could not prove (the status is then
        #: ``unverified`` unless something failed).
        self.unverified_ops: List[Tuple[str, str]] = [
            (labels[op], reason) for op, outcome, reason in decisions if outcome == "not_replayable"
        ]
        self.unverified: int = len(self.unverified_ops)
        # Ops that replayed exactly but no perturbation moved were re-run too.
        self.replayed += sum(1 for _, _, reason in decisions if reason == "perturbation_inconclusive")
        #: Unverified ops that are effect regions (:data:`EFFECT_REGION_REASONS`).
        self.effect_regions: int = sum(
            1 for _, reason in self.unverified_ops if reason in EFFECT_REGION_REASONS
        )
        #: Unverified ops outside effect regions: pure ops replay could not prove. Either count
        #: above zero keeps the state from ``passed`` (unverified is not a pass).
        self.pure_unverified: int = self.unverified - self.effect_regions
        #: Labels of ops that read (or are) a value whose producer was never recorded.
        self.unresolved_producers: List[str] = [
            label for label, reason in self.unverified_ops if reason == UNRESOLVED_PRODUCER
        ]

    @property
    def passed(self) -> bool:
        """Whether validation passed (False for every other state, final or not)."""
        return self.state == "passed"

    def outcome(self) -> Any:
        """What ``validate_forward_pass`` returns: True/False when the state is final, otherwise
        this status."""
        return self.passed if self.state in FINAL_STATES else self

    def __bool__(self) -> bool:
        if self.state not in FINAL_STATES:
            raise TypeError(
                f"validation is {self.state} ({self.reason}), neither passed nor failed; "
                "branch on status.state or status.passed"
            )
        return self.state == "passed"

    def counts(self) -> Dict[str, int]:
        """``replayed``, ``failed``, ``pure_unverified`` and ``effect_regions`` in one dict."""
        return {
            "replayed": self.replayed,
            "failed": self.failed,
            "pure_unverified": self.pure_unverified,
            "effect_regions": self.effect_regions,
        }

    def __repr__(self) -> str:
        where = f", first failure at {self.first_failed_op}" if self.first_failed_op else ""
        unresolved = (
            f", unresolved producers at {self.unresolved_producers}" if self.unresolved_producers else ""
        )
        return (
            f"<ValidationStatus {self.state} ({self.reason}){where}{unresolved}: "
            f"{self.replayed} replayed, {self.pure_unverified} pure unverified, "
            f"{self.effect_regions} effect regions>"
        )


def fold(decisions: List[Tuple[int, str, str]], labels: List[str], runtime_available: bool = True) -> Any:
    """Folds ``(op, outcome, reason)`` decisions in the core."""
    return ValidationStatus(core().fold_validation(decisions, runtime_available), decisions, labels)
