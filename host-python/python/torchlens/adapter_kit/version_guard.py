"""The payload guard of frameworks whose arrays change in place and count their writes: a
trace's saved values are the model's own arrays, so one changed after the capture is refused
(``payload_modified_after_capture``) instead of served as what the model computed."""

from __future__ import annotations

from typing import Any, Callable, Dict

from ..errors import PayloadModifiedError


class VersionGuard:
    """Checks a saved value's write counter (``version_of(value)``) against the one recorded
    when the capture held it (``versions``: value id → counter)."""

    __slots__ = ("versions", "version_of")

    def __init__(self, versions: Dict[int, int], version_of: Callable[[Any], int]) -> None:
        self.versions = versions
        self.version_of = version_of

    def __call__(self, value_id: int, value: Any) -> None:
        expected = self.versions.get(value_id)
        if expected is not None and self.version_of(value) != expected:
            raise PayloadModifiedError(
                "this saved value was modified in place after the capture",
                "payload_modified_after_capture",
                "clone tensors returned by the model before changing them in place, or trace again",
            )
