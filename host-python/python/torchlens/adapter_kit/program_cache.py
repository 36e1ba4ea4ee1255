"""Programs traced once per call signature and kept for the next capture of the same call, as a
compiling framework keeps its traces: for a backend whose capture first traces the user's
function to a program (tracing runs the user's Python once per op, most of a capture's cost).

The backend builds the key (what its own tracing cache keys on: argument structure, abstract
values, configuration) and names the objects the trace depends on by identity (``anchors``: the
function, its closure cells, its defaults). An entry is reused only while those very objects are
alive and the same; it dies with the function (weakly held where the object allows it). An entry
also keeps what depends on the program alone: the refusal checks it passed, prepared ops and
compiled programs (see :mod:`.program_import`)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, Hashable, Optional, Set


class Entry:
    """One traced signature: what tracing returned (``traced``) and what was derived from it."""

    __slots__ = ("traced", "anchors", "dead", "checked", "steps", "programs", "__weakref__")

    def __init__(self, traced: Any, anchors: tuple) -> None:
        self.traced = traced
        #: The objects the key names by identity: weakly where they allow it (the entry dies with
        #: the function, and an id is never reused under a live entry), otherwise strongly (so
        #: their ids cannot be reused).
        self.anchors = tuple(_anchor(anchor, self) for anchor in anchors)
        #: Set when a weakly held anchor is collected; the entry is dropped at the next lookup.
        self.dead = False
        #: The refusal checks (by the backend's own key) this program passed.
        self.checked: Set[Any] = set()
        #: Prepared ops, by ``id`` of the program's op (the program keeps every op alive).
        self.steps: Dict[int, Any] = {}
        #: Compiled programs (:class:`~.program_import.Program`), by ``id`` of each body (or
        #: another key naming the body, such as a branch chosen at run time).
        self.programs: Dict[Hashable, Any] = {}

    def anchored(self, anchors: tuple) -> bool:
        """Whether ``anchors`` are the very objects this entry was traced with."""
        if self.dead or len(anchors) != len(self.anchors):
            return False
        for held, anchor in zip(self.anchors, anchors):
            if (held.value if type(held) is _Strong else held()) is not anchor:
                return False
        return True


class _Strong:
    """An anchor that cannot be weakly referenced, held as is."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _anchor(anchor: Any, entry: Entry) -> Any:
    owner = weakref.ref(entry)

    def collected(_: Any) -> None:
        # Only a flag: a collection can run in the middle of any dict operation.
        alive = owner()
        if alive is not None:
            alive.dead = True

    try:
        return weakref.ref(anchor, collected)
    except TypeError:
        return _Strong(anchor)


class ProgramCache:
    """At most ``capacity`` traced signatures, the least recently used dropped first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Any, Entry] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Drops every entry (the next capture of each function traces it again)."""
        with self._lock:
            self._entries.clear()

    def count(self) -> int:
        """How many live traced signatures the cache holds."""
        with self._lock:
            return sum(1 for entry in self._entries.values() if not entry.dead)

    def lookup(self, key: Optional[Any], anchors: Optional[tuple], trace: Callable[[], Any]) -> Entry:
        """The entry for ``key`` traced with ``anchors``, or a new one from ``trace()`` on a miss.
        ``key=None`` (no stable key: an unhashable static argument) traces every time."""
        if key is not None:
            try:
                hash(key)
            except (TypeError, ValueError):  # an unhashable static leaf or structure
                key = None
        if key is not None:
            with self._lock:
                try:
                    entry = self._entries.get(key)
                except (TypeError, ValueError):  # a static leaf whose == does not answer a bool
                    key, entry = None, None
                if entry is not None and entry.anchored(anchors or ()):
                    self._entries.move_to_end(key)
                    return entry
        # Traced outside the lock: tracing runs user code, which may capture on another thread.
        entry = Entry(trace(), tuple(anchors or ()))
        if key is not None:
            with self._lock:
                for stale in [stale for stale, held in self._entries.items() if held.dead]:
                    del self._entries[stale]
                self._entries[key] = entry
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
        return entry


def function_anchors(function: Any) -> Optional[tuple]:
    """The objects a plain callable's trace depends on by identity: the function (for a bound
    method, the function and its instance), each closure cell's contents and the default
    arguments; None when a closure cell is empty (nothing stable to key on)."""
    anchors = [function]
    target = function
    owner = getattr(function, "__self__", None)
    if owner is not None and hasattr(function, "__func__"):
        target = function.__func__
        anchors = [target, owner]
    for cell in getattr(target, "__closure__", None) or ():
        try:
            anchors.append(cell.cell_contents)
        except ValueError:
            return None
    anchors.append(getattr(target, "__defaults__", None))
    anchors.append(getattr(target, "__kwdefaults__", None))
    return tuple(anchors)
