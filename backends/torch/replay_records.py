"""The replay records of one torch capture (value id → ``ReplayRecord``), made when first read.

Replay reads the records only when a trace is validated or forked, so the native recorder
(``backends/torch/native/src/held_op.rs``) keeps each op's replay facts as Rust data
(``_native.PendingReplays``) instead of making a record, a reference per tensor argument, a
tuple and a dict on every op. The first read makes them all, the same objects the Python path
(``Capture.record``) makes at the op, which it still stores here directly."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, Optional

from torchlens.adapter_kit.replay import ReplayRecord


class ReplayRecords(MutableMapping):
    """Value id → ``ReplayRecord``: a dict, plus the native recorder's pending ops (``pending``,
    None without the native recorder), filled in on the first read."""

    __slots__ = ("_records", "pending")

    def __init__(self) -> None:
        self._records: Dict[int, ReplayRecord] = {}
        self.pending: Any = None

    def _filled(self) -> Dict[int, ReplayRecord]:
        pending = self.pending
        if pending is not None and len(pending):
            pending.fill(self._records)
        return self._records

    def __getitem__(self, value_id: int) -> ReplayRecord:
        return self._filled()[value_id]

    def get(self, value_id: int, default: Optional[ReplayRecord] = None) -> Optional[ReplayRecord]:
        return self._filled().get(value_id, default)

    def __contains__(self, value_id: object) -> bool:
        return value_id in self._filled()

    def __setitem__(self, value_id: int, record: ReplayRecord) -> None:
        self._records[value_id] = record

    def __delitem__(self, value_id: int) -> None:
        del self._filled()[value_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._filled())

    def __len__(self) -> int:
        return len(self._filled())
