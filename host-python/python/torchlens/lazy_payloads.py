"""A loaded trace that needs no framework until a value is asked for as a framework array.

``tl.load`` reads structure from the core and leaves the payload bytes where they are (a map of
the file, or private memory): :class:`DeferredBackend` stands for the file's backend by its
declaration alone (name and spec, no import), and :class:`LazyPayloads` turns a payload into
the framework's array only when it is read. So ops, summaries, selection, drawing and values
as NumPy arrays (:meth:`LazyPayloads.numpy`) import no framework, and a file opens where its
framework is not installed; asking for a framework array there is refused with
``framework_not_installed``, naming the install extra."""

from __future__ import annotations

import mmap
from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, NamedTuple, Optional

from .adapter_kit import array_codec
from .backends import get_backend
from .errors import BackendUnsupportedError, TlspecFormatError


class DeferredBackend:
    """A backend known by its declaration; its protocol object (and so its framework) is
    loaded on first use of anything beyond ``name`` and ``spec``."""

    def __init__(self, spec: Any) -> None:
        self.name = spec.name
        self.spec = spec
        self._loaded: Any = None

    def load(self) -> Any:
        """The backend's protocol object, importing its framework now; a framework that cannot
        be imported is ``framework_not_installed``, naming the install extra."""
        if self._loaded is None:
            requirement = self.spec.requirement
            try:
                self._loaded = get_backend(self.name)
            except ImportError as error:
                raise BackendUnsupportedError(
                    f"the {self.name} backend needs {requirement.module}, which does not import "
                    f"here ({error}); the trace's structure, summary, selection, drawing and "
                    "NumPy values (op.numpy()) work without it",
                    "framework_not_installed",
                    f"pip install 'torchlens[{requirement.extra}]'",
                    framework=self.name,
                ) from None
        return self._loaded

    def __getattr__(self, name: str) -> Any:
        # Only attributes this class does not have (validation, conversion, ...) get here.
        return getattr(self.load(), name)


class PayloadSource(NamedTuple):
    """Where a payload's bytes are and what they hold."""

    buffer: Any
    offset: int
    length: int
    dtype: str
    shape: list


def _checked(source: PayloadSource) -> PayloadSource:
    """``source``, after checking that a mapped file still holds its bytes. A view over a map
    whose file shrank kills the process with SIGBUS when touched, which Python cannot catch:
    before a view is made, a file that changed under the trace is a typed error instead. (A view
    made earlier is not protected; ``in_memory=True`` is.)"""
    if isinstance(source.buffer, mmap.mmap):
        try:
            size = source.buffer.size()
        except (OSError, ValueError):
            size = -1
        if size < source.offset + source.length:
            raise TlspecFormatError(
                f"the file shrank under the loaded trace: a payload needs its bytes up to "
                f"{source.offset + source.length}, the file now has {max(size, 0)}",
                "tlspec_file_changed",
                "load the file again once it is written; files other processes may change load "
                "with in_memory=True (or untrusted=True)",
            )
    return source


class LazyPayloads(MutableMapping):
    """Payload slot → framework array, each made from its bytes on first read."""

    def __init__(self, backend: DeferredBackend, sources: Dict[int, PayloadSource]) -> None:
        self._backend = backend
        self._sources = dict(sources)
        self._values: Dict[int, Any] = {}

    def numpy(self, slot: int) -> Optional[Any]:
        """The payload as a NumPy array over the file's bytes (no framework; a dtype NumPy lacks,
        such as ``bfloat16``, comes back as its raw bits: ``uint16``); None when not kept."""
        source = self._sources.get(slot)
        if source is None:
            value = self._values.get(slot)
            return None if value is None else self._backend.to_numpy(value)
        source = _checked(source)
        return array_codec.array_from_buffer(
            source.buffer, source.offset, source.length, source.dtype, source.shape
        )

    def __getitem__(self, slot: int) -> Any:
        if slot not in self._values:
            source = _checked(self._sources[slot])
            self._values[slot] = self._backend.payload_from_buffer(
                source.buffer, source.offset, source.length, source.dtype, source.shape
            )
        return self._values[slot]

    def __setitem__(self, slot: int, value: Any) -> None:
        self._values[slot] = value
        self._sources.pop(slot, None)

    def __delitem__(self, slot: int) -> None:
        if slot not in self._values and slot not in self._sources:
            raise KeyError(slot)
        self._values.pop(slot, None)
        self._sources.pop(slot, None)

    def __contains__(self, slot: object) -> bool:
        return slot in self._sources or slot in self._values

    def __iter__(self) -> Iterator[int]:
        yield from self._values
        yield from (slot for slot in self._sources if slot not in self._values)

    def __len__(self) -> int:
        return len(self._values) + sum(1 for slot in self._sources if slot not in self._values)
