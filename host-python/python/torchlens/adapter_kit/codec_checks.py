"""Checks of a ``.tlspec``'s codec metadata before any of it reaches a framework. The manifest
comes from the file, so from anyone: a backend hands its codec metadata to its framework only
once it has the shapes the backend's ``codec_metadata`` writes. Anything else is a ``.tlspec``
error with a code (``tlspec_codec_metadata_invalid``), never the framework's own ``TypeError``
or ``ValueError``."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping

from ..errors import TlspecFormatError
from ..terminal_text import shown


class CodecChecks:
    """The checks of one backend's codec metadata; ``remedy`` says what to do about a file
    that fails them."""

    def __init__(self, remedy: str) -> None:
        self.remedy = remedy

    def invalid(self, message: str) -> TlspecFormatError:
        """The error for codec metadata the framework must not be handed."""
        return TlspecFormatError(shown(message), "tlspec_codec_metadata_invalid", self.remedy)

    def by_label(self, codec: Mapping[str, Any], key: str, labels: Iterable[str]) -> Dict[str, Any]:
        """``codec[key]`` (absent: empty), checked to be an object whose keys are payload
        ``labels`` of the file."""
        entries = codec.get(key, {})
        if not isinstance(entries, dict):
            raise self.invalid(f"{key} is not an object")
        known = set(labels)
        for label in entries:
            if label not in known:
                raise self.invalid(f"{key} names {label!r}, which is no payload of the file")
        return entries

    def fields(self, entry: Any, kinds: Mapping[str, type], what: str) -> None:
        """``entry`` is an object whose fields among ``kinds`` have their kinds (a bool is no
        number)."""
        if not isinstance(entry, dict):
            raise self.invalid(f"{what} is not an object")
        for field, kind in kinds.items():
            if field in entry and (not isinstance(entry[field], kind) or isinstance(entry[field], bool)):
                raise self.invalid(f"{what} has a {field} that is not a {kind.__name__}")


def strings(value: Any) -> bool:
    """Whether ``value`` is a list of strings."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def sizes(value: Any, count: int, limit: int) -> bool:
    """Whether ``value`` is a list of ``count`` integers in ``1..limit``."""
    return (
        isinstance(value, list)
        and len(value) == count
        and all(isinstance(size, int) and not isinstance(size, bool) and 0 < size <= limit for size in value)
    )
