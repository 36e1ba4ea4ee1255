"""Which op types a capture refuses, declared once by a backend as name patterns: an op that
writes persistent state (replay and the saved values would see the new value) and an op that
draws from a random state (replay would draw again). The same declaration answers for the
framework's graphs scanned before anything runs, for the functions refused as the forward calls
them, and for an op seen as it runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Pattern

#: ``refuse(what)``: the backend's typed refusal, ``what`` naming the op type and where it was seen.
Refuse = Callable[[str], Exception]


@dataclass(frozen=True)
class OpTypeRefusals:
    """``writes`` matches (from the start) every op type that writes persistent state; ``draws``
    is searched in an op type's name, and an op type it finds draws unless ``deterministic``
    matches it (a seeded function of its inputs) or ``stateful(op_type)`` says it keeps no
    state. ``refuse_write`` and ``refuse_draw`` make the backend's refusals."""

    writes: Pattern[str]
    draws: Pattern[str]
    refuse_write: Refuse
    refuse_draw: Refuse
    deterministic: Optional[Pattern[str]] = None
    stateful: Callable[[str], bool] = lambda op_type: True

    def is_write(self, op_type: str) -> bool:
        """Whether an op type writes persistent state."""
        return bool(self.writes.match(op_type))

    def is_random(self, op_type: str) -> bool:
        """Whether an op type draws from a random state."""
        if self.deterministic is not None and self.deterministic.match(op_type):
            return False
        return bool(self.draws.search(op_type)) and self.stateful(op_type)

    def refusal(self, op_type: str, where: str) -> Optional[Exception]:
        """The refusal of a draw or a write of ``op_type`` (``where`` says where it was seen), or
        None for any other op type."""
        if self.is_random(op_type):
            return self.refuse_draw(f"{op_type} {where}")
        if self.is_write(op_type):
            return self.refuse_write(f"{op_type} {where}")
        return None

    def check(self, op_types: Iterable[str], where: str) -> None:
        """Refuses the first draw or write among ``op_types``."""
        for op_type in op_types:
            error = self.refusal(op_type, where)
            if error is not None:
                raise error

    def refused(self, op_types: Iterable[str]) -> List[str]:
        """The op types among ``op_types`` that draw or write."""
        return [op_type for op_type in op_types if self.is_random(op_type) or self.is_write(op_type)]
