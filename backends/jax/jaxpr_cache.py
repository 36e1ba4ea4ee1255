"""The jaxpr of a root, traced once per call signature, as ``jax.jit`` caches its traces.

Tracing the function to a jaxpr (``jax.make_jaxpr``) runs the user's Python once per op and is
most of a capture's cost; a second capture of the same callable on arguments of the same
structure, shapes and dtypes reuses the jaxpr of the first. The key is what ``jax.jit`` keys
its traces on, taken a little stricter: the callable (by identity, with its closure cells and
default arguments; for module roots the module class and static structure), the pytree
structure of ``(params, inputs, kwargs)`` with every non-array leaf by value, each array leaf's
abstract value (shape, dtype, weak type, sharding), and JAX's trace context (``jax_enable_x64``,
default precision and the other configuration a trace depends on). As with ``jax.jit``, Python
state the function reads without taking it as an argument or closing over it (a global, an
attribute of a captured object changed in place) is read at the first trace only.

A key that cannot be built (an unhashable static leaf) simply traces every time. Each entry
also keeps what depends on the jaxpr alone: which refusal checks it passed, and the prepared
equations (:class:`~.dispatch.Step`) the capture runs."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Dict, Optional, Set, Tuple

import jax

try:
    from jax._src.config import trace_context as _trace_context
except ImportError:  # pragma: no cover - depends on the installed JAX
    _trace_context = None

#: Entries kept (least recently used dropped first): each holds a jaxpr and its closure constants.
CAPACITY = 64


class Entry:
    """One traced signature: the jaxpr, the output structure, and what was derived from them."""

    __slots__ = ("closed", "output_shape", "anchors", "dead", "checked", "steps", "programs", "__weakref__")

    def __init__(self, closed: Any, output_shape: Any, anchors: tuple) -> None:
        self.closed = closed
        self.output_shape = output_shape
        #: The objects the key names by identity: weakly where they allow it (the entry dies with
        #: the function, as a ``jax.jit`` trace does, and an id is never reused under a live
        #: entry), otherwise strongly (so their ids cannot be reused).
        self.anchors = tuple(_anchor(anchor, self) for anchor in anchors)
        #: Set when a weakly held anchor is collected; the entry is dropped at the next lookup.
        self.dead = False
        #: (control-flow mode, attributed) pairs whose refusal check passed.
        self.checked: Set[Tuple[str, bool]] = set()
        #: Prepared plain equations, by ``id(eqn)`` (the jaxpr keeps every equation alive).
        self.steps: Dict[int, Any] = {}
        #: Compiled walks (:class:`~.program.Program`), by ``id(jaxpr)`` of each body walked.
        self.programs: Dict[int, Any] = {}

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


_ENTRIES: OrderedDict[tuple, Entry] = OrderedDict()
_LOCK = threading.Lock()


def clear() -> None:
    """Drops every cached jaxpr (the next capture of each function traces it again)."""
    with _LOCK:
        _ENTRIES.clear()


def cached_count() -> int:
    """How many live traced signatures the cache holds."""
    with _LOCK:
        return sum(1 for entry in _ENTRIES.values() if not entry.dead)


def _aval(leaf: Any) -> Any:
    if isinstance(leaf, jax.Array):
        return leaf.aval, leaf.sharding
    return type(leaf), leaf.shape, leaf.dtype


def _key(root: Any) -> Optional[tuple]:
    if _trace_context is None or root.anchors is None:
        return None
    dynamic = set(root.dynamic_index)
    statics = tuple(
        (index, type(leaf), leaf) for index, leaf in enumerate(root.leaves) if index not in dynamic
    )
    avals = tuple(_aval(root.leaves[index]) for index in root.dynamic_index)
    key = (
        root.kind,
        root.framework,
        tuple(id(anchor) for anchor in root.anchors),
        root.structure,
        root.treedef,
        statics,
        avals,
        _trace_context(),
    )
    try:
        hash(key)
    except (TypeError, ValueError):  # an unhashable static leaf or structure
        return None
    return key


def lookup(root: Any) -> Entry:
    """The cached entry for ``root``'s call, tracing it on a miss."""
    key = _key(root)
    if key is not None:
        with _LOCK:
            try:
                entry = _ENTRIES.get(key)
            except (TypeError, ValueError):  # a static leaf whose == does not answer a bool
                key, entry = None, None
            if entry is not None and entry.anchored(root.anchors):
                _ENTRIES.move_to_end(key)
                return entry
    # Traced outside the lock: tracing runs user code, which may capture on another thread.
    closed, output_shape = jax.make_jaxpr(root.flat, return_shape=True)(*root.dynamic)
    entry = Entry(closed, output_shape, tuple(root.anchors or ()))
    if key is not None:
        with _LOCK:
            for stale in [stale for stale, held in _ENTRIES.items() if held.dead]:
                del _ENTRIES[stale]
            _ENTRIES[key] = entry
            while len(_ENTRIES) > CAPACITY:
                _ENTRIES.popitem(last=False)
    return entry


def function_anchors(function: Any) -> Optional[tuple]:
    """The objects a raw callable's trace depends on by identity: the function (for a bound
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
