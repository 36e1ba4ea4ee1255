"""One capture's lifecycle, shared by every adapter: start a core session, report events (sent
to the core in bounded batches whether or not a live plan runs, so memory outside the payloads
stays bounded), keep payloads by the adapter's own value ids, drop the ones the live plan
rejects as soon as its decisions arrive, finish into a :class:`~torchlens.trace.Trace` with the
selection finalised, or abort and free everything.

Ids: the adapter names every value (``new_value_id``); that id is also the value's payload
slot, the key of every live decision and of the stop frontier. The core's op numbering never
leaves the core."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .request import CaptureRequest

#: Events sent to the core per batch: large enough that the per-call cost vanishes, small
#: enough that the pending events (and, under a live plan, the undecided payloads) stay bounded.
EVENTS_PER_BATCH = 64

#: Sessions started and neither finished nor aborted (``open_session_count``), by ``id``.
_OPEN_SESSIONS: Set[int] = set()

#: An op output as the adapter reports it: (value id, the value, shape, neutral dtype name).
Output = Tuple[int, Any, Sequence[int], str]


class CaptureSession:
    """A capture in progress. Use it as a context manager: leaving the block by an exception
    (``KeyboardInterrupt`` included) abandons the core session and drops every payload."""

    def __init__(self, request: CaptureRequest) -> None:
        from .._core import core

        self.request = request
        options = request.options
        selector = request.save.selector if request.save.mode == "selected" else None
        self._native = core().start_session(
            options.recurrence_detection,
            options.compute_input_output_distances,
            selector.arena() if selector is not None else None,
        )
        #: Value id → the value kept as its payload (the public payloads of the trace).
        self.payloads: Dict[int, Any] = {}
        #: Values every trace keeps whatever ``save=`` says (constants and buffers: replay reads
        #: them as leaves, and they are small).
        self.leaf_values: Set[int] = set()
        #: Values the live plan selected.
        self.selected: Set[int] = set()
        self._keep_outputs = request.save.mode != "none"
        self._next_value = 1
        self._unsent = 0
        self._open = True
        _OPEN_SESSIONS.add(id(self))

    # ---- ids ---------------------------------------------------------------------------------

    def new_value_id(self) -> int:
        """A fresh id for one runtime value (also its payload slot)."""
        value_id = self._next_value
        self._next_value += 1
        return value_id

    # ---- events ------------------------------------------------------------------------------

    def module(
        self, module_id: int, addresses: List[str], class_name: str, container: bool, training: bool
    ) -> None:
        """Declares a module object under its addresses (primary first; the root is ``self``)."""
        self._native.module(module_id, addresses, class_name, container, training)
        self._sent()

    def param(
        self, value_id: int, address: str, module_id: int, shape: Sequence[int], dtype: str, trainable: bool
    ) -> None:
        """Declares a parameter (no payload: the model holds it)."""
        self._native.param(value_id, address, module_id, tuple(shape), dtype, trainable)
        self._sent()

    def input(self, name: str, value_id: int, value: Any, shape: Sequence[int], dtype: str) -> None:
        """A model input; kept unless ``save=False``."""
        self._native.input(name, value_id, tuple(shape), dtype, self._keep(value_id, value))
        self._sent()

    def constant(self, value_id: int, value: Any, shape: Sequence[int], dtype: str) -> None:
        """A value read from outside the traced call; always kept (replay reads it as a leaf)."""
        self._keep_leaf(value_id, value)
        self._native.constant(value_id, tuple(shape), dtype, value_id)
        self._sent()

    def buffer(self, address: str, value_id: int, value: Any, shape: Sequence[int], dtype: str) -> None:
        """A module buffer read during the forward; always kept, like a constant."""
        self._keep_leaf(value_id, value)
        self._native.buffer(address, value_id, tuple(shape), dtype, value_id)
        self._sent()

    def op(
        self,
        func: str,
        parents: List[Tuple[int, int]],
        outputs: Iterable[Output],
        in_place: bool = False,
        attributes: Sequence[Tuple[str, str]] = (),
        source: Optional[Tuple[str, int, str]] = None,
        keep: bool = True,
    ) -> None:
        """One op: ``parents`` are ``(value id, argument position)``; each output is kept as a
        payload (unless ``keep=False``, for values that have no bytes, or ``save=False``)."""
        # The hot path of every capture: no helper calls per output.
        keep = keep and self._keep_outputs
        payloads = self.payloads
        described = []
        for value_id, value, shape, dtype in outputs:
            if keep:
                payloads[value_id] = value
                described.append((value_id, shape, dtype, value_id))
            else:
                described.append((value_id, shape, dtype, None))
        self._native.op(func, parents, described, in_place, attributes, source)
        self._sent()

    def enter(self, module_id: int) -> None:
        """A module call starts."""
        self._native.enter(module_id)
        self._sent()

    def exit(self, module_id: int, outputs: List[int]) -> None:
        """A module call ends, returning these values."""
        self._native.exit(module_id, outputs)
        self._sent()

    def output(self, name: str, value_id: int) -> None:
        """A model output (``name`` is its path in the returned structure)."""
        self._native.output(name, value_id)
        self._sent()

    def extra(self, key: str, value: str) -> None:
        """A backend fact about the whole trace (``provenance.*`` keys show in
        ``trace.provenance``)."""
        self._native.extra(key, value)
        self._sent()

    def edit(self, value_id: int, rule: str, action: str, timing: str) -> None:
        """Records that an edit rule replaced the value ``value_id`` (see :mod:`torchlens.edits`)."""
        self._native.edit(value_id, rule, action, timing)
        self._sent()

    def mark_stopped(self, reason: str, frontier: List[int]) -> None:
        """The capture stopped early (``stop_after=``) right after the values in ``frontier``."""
        self.flush()
        self._native.mark_stopped(reason, frontier)

    def mark_unverified(self, reason: str) -> None:
        """The capture may be incomplete (``trace.capture_verified`` becomes False)."""
        self.flush()
        self._native.mark_unverified(reason)

    # ---- payloads ------------------------------------------------------------------------------

    def _keep(self, value_id: int, value: Any) -> Optional[int]:
        if not self._keep_outputs:
            return None
        self.payloads[value_id] = value
        return value_id

    def _keep_leaf(self, value_id: int, value: Any) -> None:
        self.payloads[value_id] = value
        self.leaf_values.add(value_id)

    def replace_payload(self, value_id: int, value: Any) -> None:
        """Swaps a kept payload for another array (a copy made before an in-place write)."""
        if value_id in self.payloads:
            self.payloads[value_id] = value

    # ---- batches and live decisions --------------------------------------------------------------

    def _sent(self) -> None:
        self._unsent += 1
        if self._unsent >= EVENTS_PER_BATCH:
            self.flush()

    def flush(self) -> None:
        """Sends the pending events; applies the live plan's decisions they made possible."""
        self._unsent = 0
        self._apply(self._native.flush())

    def _apply(self, decisions: List[Tuple[int, bool]]) -> None:
        """A rejected value's payload is dropped at once (the single-pass memory saving)."""
        for value_id, selected in decisions:
            if selected:
                self.selected.add(value_id)
            elif value_id not in self.leaf_values:
                self.payloads.pop(value_id, None)

    # ---- the end -----------------------------------------------------------------------------

    def finish(
        self,
        adapter: Any,
        runtime: Any = None,
        payload_guard: Optional[Callable[[int, Any], None]] = None,
    ) -> Any:
        """Finalizes the trace: the core labels and groups, the selection is finalised (selected
        values plus constants and buffers; a selector that matched nothing warns), and the
        capture-unverified warning is raised when the core says the capture may be incomplete."""
        from ..trace import Trace, warn_matched_nothing

        native_trace, decisions = self._native.finish()
        self._close()
        self._apply(decisions)
        save = self.request.save
        if save.mode == "selected":
            kept = self.selected | self.leaf_values
            self.payloads = {value_id: value for value_id, value in self.payloads.items() if value_id in kept}
            native_trace.keep_payloads(sorted(self.payloads))
            if not self.selected:
                # warn ← finish ← the adapter's capture ← tl.trace ← the caller's line
                warn_matched_nothing(save.selector, stacklevel=5)
        elif save.mode == "none":
            self.payloads = {}
            native_trace.keep_payloads([])
        trace = Trace(
            native_trace,
            self.payloads,
            adapter,
            runtime=runtime,
            payload_guard=payload_guard,
        )
        trace.facets = self.request.facets
        if not trace.capture_verified:
            from ..errors import CaptureUnverifiedWarning

            warnings.warn(
                f"the capture may be incomplete: {trace.capture_reason}",
                CaptureUnverifiedWarning,
                stacklevel=4,
            )
        return trace

    def abort(self) -> None:
        """Abandons the capture: the core frees the session, every payload is dropped."""
        if self._open:
            self._close()
            self._native.abandon()
        self.payloads = {}
        self.selected.clear()

    def _close(self) -> None:
        self._open = False
        _OPEN_SESSIONS.discard(id(self))

    @property
    def is_open(self) -> bool:
        """Whether the core session is still open."""
        return self._open

    def __enter__(self) -> CaptureSession:
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if kind is not None:
            self.abort()


def open_session_count() -> int:
    """Capture sessions of this process that are neither finished nor aborted (a capture that
    raised must leave none behind)."""
    return len(_OPEN_SESSIONS)
