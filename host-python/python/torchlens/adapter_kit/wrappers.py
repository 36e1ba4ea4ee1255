"""Installing a capture's hooks and wrappers so that they always come off again, and act only for
the thread that started the capture (every other thread passes straight through)."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, Iterable, List, Tuple, TypeVar

_Capture = TypeVar("_Capture", bound=Callable[..., Any])


def takes_turns(capture: _Capture) -> _Capture:
    """Makes a backend's ``capture`` run one call at a time across threads (each decorated
    method has its own lock). For backends whose wrappers replace process-wide attributes
    (module functions, array methods): two captures overlapping on different threads would
    stack their wrappers, and the one finishing first would restore the originals under the
    other. Other threads' plain calls still pass through the owner-thread wrappers untouched;
    only captures wait for each other. A nested capture on the same thread is refused before
    it gets here (``trace_nested``)."""
    lock = threading.RLock()

    @functools.wraps(capture)
    def one_at_a_time(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return capture(*args, **kwargs)

    return one_at_a_time  # type: ignore[return-value]


class Patches:
    """What one capture installed. Used as a context manager: on leaving the block, normally, by
    an exception inside the forward or by ``KeyboardInterrupt``, every replaced attribute gets
    its original back and every undo step runs, in reverse order of installation."""

    def __init__(self) -> None:
        self._undo: List[Callable[[], None]] = []
        self.owner_thread = threading.get_ident()
        #: ``id(original)`` → ``(owner, name)`` of every attribute :meth:`wrap` replaced.
        self.wrapped: Dict[int, Tuple[Any, str]] = {}

    def is_owner_thread(self) -> bool:
        """Whether the calling thread is the one that started the capture."""
        return threading.get_ident() == self.owner_thread

    def on_exit(self, undo: Callable[[], None]) -> None:
        """Runs ``undo`` when the capture ends (removing a hook handle, untagging values)."""
        self._undo.append(undo)

    def replace(self, owner: Any, name: str, value: Any) -> None:
        """Sets ``owner.name = value`` until the capture ends."""
        missing = object()
        original = owner.__dict__.get(name, missing) if hasattr(owner, "__dict__") else getattr(owner, name)

        def restore() -> None:
            if original is missing:
                delattr(owner, name)
            else:
                setattr(owner, name, original)

        setattr(owner, name, value)
        self._undo.append(restore)

    def wrap(self, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Replaces ``owner.name`` by ``make(original)`` for the owner thread only: other threads
        call the original untouched. A property's getter is wrapped (it stays a property)."""
        raw = _class_attribute(owner, name) if isinstance(owner, type) else None
        if isinstance(raw, property) and raw.fget is not None:
            # A computed property stays one: its getter is what the wrapper wraps.
            getter = self.for_owner_thread(make(raw.fget), raw.fget)
            self.replace(owner, name, property(getter, raw.fset, raw.fdel, raw.__doc__))
            return
        original = getattr(owner, name)
        self.wrapped[id(original)] = (owner, name)
        self.replace(owner, name, self.for_owner_thread(make(original), original))

    def rebind_held(self, objects: Iterable[Any]) -> None:
        """Points the instance attributes of ``objects`` that hold a function :meth:`wrap`
        replaced at its wrapper, for the capture: they were read before the wrappers were
        installed (a pooling layer that keeps its reduction function), so they would bypass them."""
        for obj in objects:
            try:
                attributes = vars(obj)
            except TypeError:
                continue
            for name, value in list(attributes.items()):
                found = self.wrapped.get(id(value))
                if found is not None:
                    self.replace(obj, name, getattr(*found))

    def for_owner_thread(
        self, wrapper: Callable[..., Any], passthrough: Callable[..., Any]
    ) -> Callable[..., Any]:
        """``wrapper`` on the owner thread, ``passthrough`` on every other thread."""
        owner_thread = self.owner_thread

        def dispatch(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == owner_thread:
                return wrapper(*args, **kwargs)
            return passthrough(*args, **kwargs)

        # The original's name and documentation, copied by hand: a capture installs hundreds of
        # wrappers, and functools.update_wrapper costs several times as much (it also fails on
        # an extension callable whose metadata has the wrong type).
        for attribute in _COPIED:
            try:
                setattr(dispatch, attribute, getattr(passthrough, attribute))
            except (AttributeError, TypeError):
                pass
        dispatch.__wrapped__ = passthrough  # type: ignore[attr-defined]
        return dispatch

    def restore_all(self) -> None:
        """Undoes everything installed so far (also called on leaving the block)."""
        errors = []
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception as error:  # keep undoing the rest; report the first failure after
                errors.append(error)
        if errors:
            raise errors[0]

    def __enter__(self) -> Patches:
        self.owner_thread = threading.get_ident()
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        self.restore_all()


#: What a thread dispatcher copies from the function it stands in for.
_COPIED = ("__module__", "__name__", "__qualname__", "__doc__")


def _class_attribute(owner: type, name: str) -> Any:
    """``name`` as a class defines it (a property stays a property), without running it."""
    for klass in owner.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None
