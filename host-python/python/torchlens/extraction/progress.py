"""The progress line of a job: rows done, rows per second and the time left, redrawn in place
on stderr. Only on a terminal (``progress=None``): a log file or a CI run gets nothing."""

from __future__ import annotations

import sys
import time
from typing import IO, Optional


class Progress:
    """Counts rows; ``skipped`` rows (finished shards a rerun found) do not count toward the
    rate, so the ETA reflects the work still to do."""

    def __init__(
        self, total: Optional[int], enabled: Optional[bool] = None, stream: Optional[IO[str]] = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.total = total
        self.done = 0
        self.computed = 0
        self.started = time.perf_counter()
        self._last_draw = 0.0

    def advance(self, rows: int, skipped: bool = False) -> None:
        self.done += rows
        if not skipped:
            self.computed += rows
        now = time.perf_counter()
        if self.enabled and now - self._last_draw >= 0.1:
            self._last_draw = now
            self._draw(now)

    def rate(self) -> float:
        """Rows computed per second so far."""
        elapsed = time.perf_counter() - self.started
        return self.computed / elapsed if elapsed > 0 else 0.0

    def _draw(self, now: float) -> None:
        rate = self.rate()
        line = f"extract: {self.done}"
        if self.total:
            line += f"/{self.total} rows ({100 * self.done // max(self.total, 1)}%)"
        else:
            line += " rows"
        line += f"  {rate:,.1f} rows/s"
        if self.total and rate > 0:
            line += f"  ETA {_duration(max(self.total - self.done, 0) / rate)}"
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
