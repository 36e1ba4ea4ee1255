"""One capture's lifecycle, shared by every adapter: start a core session, report events (sent
to the core in bounded batches, so memory outside the payloads stays bounded), keep payloads by
the adapter's own value ids, finish into a :class:`~torchlens.trace.Trace` with the selection
finalised, or abort and free everything.

Under a narrow ``save=`` the core's selector is compiled into a live plan
(:mod:`.live_plan`) that the session evaluates on every op output as the op returns: a value
the plan rejects is never held, a value it selects is held (without a copy: the adapter's
``hold`` decides how), and a value it cannot decide yet is held only until the core can answer
(a label: the events go out at once; a module boundary: the enclosing call's exit, or as soon as
the adapter can no longer name the value, whichever comes first; an influence term: the core
answers from the dataflow graph with the batches, at the end of the capture at the latest).
The core's own answer for every op still arrives with the batches and is the authority: the
saved set is exactly what it selects.

Ids: the adapter names every value (``new_value_id``); that id is also the value's payload
slot, the key of every live decision and of the stop frontier. The core's op numbering never
leaves the core."""

from __future__ import annotations

import warnings
import weakref
from collections import deque
from collections.abc import MutableMapping
from typing import Any, Callable, Deque, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .._core import core
from ..errors import (
    BackendUnsupportedError,
    CaptureUnverifiedWarning,
    SelectionIncompleteWarning,
    SelectorMatchedNothingWarning,
    UnsupportedError,
)
from ..trace import Trace, warn_matched_nothing
from .live_plan import (
    REJECTED,
    ROOT_CALL,
    SELECTED,
    WAIT_CORE,
    WAIT_EXIT,
    WAIT_WINDOW,
    LivePlan,
    LiveRule,
    compile_live_plan,
)
from .request import CaptureRequest
from .streaming import PayloadSpool, finish_streamed
from .user_frame import user_stacklevel

#: Events sent to the core per batch: large enough that the per-call cost vanishes, small
#: enough that the pending events stay bounded (a few hundred kilobytes). Selection never waits
#: for a batch to fill: the live plan decides at the op, and values only the core can decide
#: send the batch at once. A batch sent mid-forward runs the core with its code and data
#: evicted by the ops (on a transformer trace a 130-event batch took ~270 µs there against ~75
#: µs warm), so a small model's events go in one batch at the end: 64 → 1024 took a 6-block
#: transformer from 30.4 to 26.8 µs per op above plain and resnet18 b1 from 1.142 to 1.114 ×
#: plain (same process, in turns, CPU time).
EVENTS_PER_BATCH = 1024

#: Sessions started and neither finished nor aborted (``open_session_count``), by ``id``.
_OPEN_SESSIONS: Set[int] = set()

#: An op output as the adapter reports it: (value id, the value, shape, neutral dtype name).
Output = Tuple[int, Any, Sequence[int], str]


class CaptureSession:
    """A capture in progress. Use it as a context manager: leaving the block by an exception
    (``KeyboardInterrupt`` included) abandons the core session and drops every payload."""

    def __init__(
        self, request: CaptureRequest, payload_bytes: Optional[Callable[[Any], memoryview]] = None
    ) -> None:
        self.request = request
        #: Under ``streaming=`` each held value is written at once, as ``trace.save`` would write
        #: it (the adapter's ``payload_bytes``); opened before the core session, so a target that
        #: cannot be written refuses with nothing started.
        self.spool: Optional[PayloadSpool] = None
        if request.streaming is not None and request.save.mode != "none":
            self.spool = _open_spool(request, payload_bytes)
        options = request.options
        selector = request.save.selector if request.save.mode == "selected" else None
        if selector is not None and request.save.value_dependent:
            # Decided by the adapter on each concrete value (``decide_value``), not by the core.
            selector = None
        self._native = core().start_session(
            options.recurrence_detection,
            options.compute_input_output_distances,
            selector.arena() if selector is not None else None,
        )
        #: Value id → the value kept as its payload (the public payloads of the trace). Under
        #: ``streaming=`` a :class:`~.streaming.PayloadSpool` that writes each value as it is held.
        self.payloads: MutableMapping[int, Any] = self.spool if self.spool is not None else {}
        #: Values every trace keeps whatever ``save=`` says (constants and buffers: replay reads
        #: them as leaves, and they are small).
        self.leaf_values: Set[int] = set()
        #: Values selected (by the live plan at the op, confirmed or overruled by the core).
        self.selected: Set[int] = set()
        #: Values the core selected whose payload was released before it answered.
        self.missed: Set[int] = set()
        #: Whether ``stop_after=`` ended the forward (``mark_stopped``).
        self.stopped = False
        #: How the adapter keeps a value as a payload (``hold(value_id, value)``): by default
        #: the value itself; a backend may keep a detached alias and record its version counter.
        self.hold: Callable[[int, Any], Any] = _hold_as_is
        self._keep_outputs = request.save.mode != "none"
        self._selector = selector
        self._plan: Optional[LivePlan] = None
        self._plan_stale = selector is not None
        #: Undecided values: value id → the plan's answer (its wait bits).
        self._undecided: Dict[int, int] = {}
        #: Undecided values a module boundary waits on → the plan's answer once the adapter can no
        #: longer name the value as a call's output (the boundary then rejects it).
        self._if_unnamed: Dict[int, int] = {}
        #: Values reported without bytes (``keep=False``): never counted as missed.
        self._without_bytes: Set[int] = set()
        #: (op count at which the core can answer, value id) for ``followed_by`` windows.
        self._windows: Deque[Tuple[int, int]] = deque()
        self._op_count = 0
        self._watchers: Dict[int, Any] = {}
        #: Module id → its call numbers open now (``ROOT_CALL`` for the root call).
        self._open_calls: Dict[int, List[int]] = {ROOT_CALL: [1]}
        self._call_counts: Dict[int, int] = {}
        self._depth = 1
        self._root_module: Optional[int] = None
        #: Bumped on every module declaration: compiled plans name modules by id.
        self.module_generation = 0
        self._root_entered = False
        #: Whether ``open_calls`` is kept up to date (see :meth:`without_call_tracking`).
        self._tracks_calls = True
        # The next value id, and events not yet sent. A native recorder (one backend has one,
        # in Rust) updates these two and ``_op_count`` itself.
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

    def new_value_ids(self, count: int) -> range:
        """``count`` fresh ids in a row (see :meth:`new_value_id`)."""
        first = self._next_value
        self._next_value += count
        return range(first, first + count)

    def peek_value_id(self) -> int:
        """The id :meth:`new_value_id` gives next."""
        return self._next_value

    # ---- events ------------------------------------------------------------------------------

    def module(
        self, module_id: int, addresses: List[str], class_name: str, container: bool, training: bool
    ) -> None:
        """Declares a module object under its addresses (primary first; the root is ``self``)."""
        self._native.module(module_id, addresses, class_name, container, training)
        if addresses and addresses[0] == "self":
            self._root_module = module_id
        self.module_generation += 1
        if self._selector is not None:
            # The plan names modules by id: one declared now needs a fresh plan.
            self._plan_stale = True
        self._sent()

    def param(
        self, value_id: int, address: str, module_id: int, shape: Sequence[int], dtype: str, trainable: bool
    ) -> None:
        """Declares a parameter (no payload: the model holds it)."""
        self._native.param(value_id, address, module_id, tuple(shape), dtype, trainable)
        self._sent()

    def declare(
        self,
        modules: Sequence[Tuple[int, List[str], str, bool, bool]],
        params: Sequence[Tuple[int, str, int, Sequence[int], str, bool]],
        prepared: Optional[Dict[type, Any]] = None,
    ) -> None:
        """Declares a whole model at once: ``modules`` as :meth:`module` takes them, then
        ``params`` as :meth:`param` does, in one call to the host. ``prepared``, when given, is
        where the host's encoded events for exactly these declarations are kept between sessions
        (an adapter keeps it with a model it has seen unchanged): the next session sends them
        again without encoding them again."""
        native = self._native
        host = type(native)
        events = None if prepared is None else prepared.get(host)
        if events is None:
            events = native.declare_model(list(modules), list(params))
            if prepared is not None:
                prepared[host] = events
        else:
            native.replay(events)
        for module_id, addresses, _class_name, _container, _training in modules:
            if addresses and addresses[0] == "self":
                self._root_module = module_id
                break
        if modules:
            self.module_generation += 1
            if self._selector is not None:
                self._plan_stale = True
        self._unsent += len(modules) + len(params)
        if self._unsent >= EVENTS_PER_BATCH:
            self.flush()

    def input(self, name: str, value_id: int, value: Any, shape: Sequence[int], dtype: str) -> None:
        """A model input; kept unless ``save=False``."""
        self._native.input(name, value_id, tuple(shape), dtype, self._keep(value_id, value))
        self._op_count += 1
        self._sent()

    def constant(self, value_id: int, value: Any, shape: Sequence[int], dtype: str) -> None:
        """A value read from outside the traced call; always kept (replay reads it as a leaf)."""
        self._keep_leaf(value_id, value)
        self._native.constant(value_id, tuple(shape), dtype, value_id)
        self._op_count += 1
        self._sent()

    def buffer(self, address: str, value_id: int, value: Any, shape: Sequence[int], dtype: str) -> None:
        """A module buffer read during the forward; always kept, like a constant."""
        self._keep_leaf(value_id, value)
        self._native.buffer(address, value_id, tuple(shape), dtype, value_id)
        self._op_count += 1
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
        """One op: ``parents`` are ``(value id, argument position)``; each output is
        ``(value id, value, shape, dtype)``. Under a narrow ``save=`` the live plan decides each
        output here; a kept value goes through ``hold``. ``keep=False`` is for values that
        have no bytes; ``save=False`` keeps nothing."""
        # The hot path of every capture: no helper calls per output.
        keep = keep and self._keep_outputs
        payloads = self.payloads
        hold = self.hold
        described = []
        plan = self._plan
        if keep and self._plan_stale:
            plan = self._compile_plan()
        send_now = False
        if keep and plan is None:
            # Every value is kept (no narrow save=): nothing to decide per output.
            for value_id, value, shape, dtype in outputs:
                payloads[value_id] = hold(value_id, value)
                described.append((value_id, shape, dtype, value_id))
            self._op_count += len(described)
            self._native.op(func, parents, described, in_place, attributes, source)
            if self._windows and self._windows[0][0] <= self._op_count:
                self.flush()
                return
            self._unsent += 1
            if self._unsent >= EVENTS_PER_BATCH:
                self.flush()
            return
        for value_id, value, shape, dtype in outputs:
            self._op_count += 1
            if not keep:
                if self._keep_outputs:
                    self._without_bytes.add(value_id)
                described.append((value_id, shape, dtype, None))
                continue
            if plan is not None:
                answer = plan.decide(func, self._open_calls, True)
                if answer == REJECTED:
                    # The slot is named anyway: a call may still return the value without computing
                    # it, and the adapter then holds it again (``finish`` trims slots to the kept).
                    described.append((value_id, shape, dtype, value_id))
                    continue
                if answer == SELECTED:
                    self.selected.add(value_id)
                else:
                    send_now |= self._wait(value_id, value, answer, func, plan)
            payloads[value_id] = hold(value_id, value)
            described.append((value_id, shape, dtype, value_id))
        self._native.op(func, parents, described, in_place, attributes, source)
        if send_now or (self._windows and self._windows[0][0] <= self._op_count):
            self.flush()
        else:
            self._sent()

    @property
    def holds_every_output(self) -> bool:
        """Whether every op output is kept (``save="all"`` in memory): the adapter may then hold
        each output itself, through ``hold`` into ``payloads``, and report the op with
        :meth:`held_op`."""
        return self._keep_outputs and self._selector is None and self.spool is None

    @property
    def holds_no_output(self) -> bool:
        """Whether no op output is kept (``save=False``, nothing streamed): nothing is decided
        per output, so an adapter may report an op's outputs with no payload and no decision
        (a backend's native recorder appends such ops to the session itself)."""
        return not self._keep_outputs and self._selector is None and self.spool is None

    def held_op(
        self,
        func: str,
        parents: List[Tuple[int, int]],
        described: List[Tuple[int, Sequence[int], str, int]],
        in_place: bool,
        source: Optional[Tuple[str, int, str]],
    ) -> None:
        """One op whose outputs the adapter already holds in ``payloads`` (only while
        :attr:`holds_every_output`): ``described`` are ``(value id, shape, dtype, value id)``.
        The hot path of a full capture: :meth:`op` without the per-output decisions."""
        self._op_count += len(described)
        self._native.op(func, parents, described, in_place, (), source)
        self._unsent += 1
        if self._unsent >= EVENTS_PER_BATCH:
            self.flush()

    def _wait(self, value_id: int, value: Any, answer: int, func: str, plan: LivePlan) -> bool:
        """Holds an undecided value until it can be decided; True when the core can answer now."""
        self._undecided[value_id] = answer
        if answer & WAIT_EXIT:
            self._if_unnamed[value_id] = plan.decide(func, self._open_calls, False)
            try:
                # When the model lets go of the value, no call can return it any more.
                retire = self.retire
                self._watchers[value_id] = weakref.ref(value, lambda _, value_id=value_id: retire(value_id))
            except TypeError:
                pass  # not weakly referenceable: the value waits for the call's exit
        if answer & WAIT_WINDOW:
            self._windows.append((self._op_count + plan.window, value_id))
        return bool(answer & WAIT_CORE)

    def _compile_plan(self) -> Optional[LivePlan]:
        """Sends the declarations and compiles the selector against them."""
        self.flush()
        self._plan = compile_live_plan(self._native.live_plan())
        self._plan_stale = False
        return self._plan

    def retire(self, value_id: int) -> None:
        """The adapter can no longer name ``value_id`` as a call's output (the model released
        it, or an in-place op made the same object carry another value): a module boundary
        rejects it, so a value nothing else keeps undecided is dropped at once. Safe to call
        from a weakref callback: it never calls into the core."""
        answer = self._if_unnamed.pop(value_id, None)
        if answer is None:
            return
        self._watchers.pop(value_id, None)
        if answer == REJECTED or answer == SELECTED:
            del self._undecided[value_id]
            if answer == SELECTED:
                self.selected.add(value_id)
            else:
                self.payloads.pop(value_id, None)
        else:
            self._undecided[value_id] = answer  # the core answers with the next batch

    def rule(self, selector: Any) -> LiveRule:
        """A static selector to decide op by op during this capture (an ``intervene=`` or
        ``stop_after=`` rule); declare the modules first. See :class:`LiveRule`."""
        self.flush()
        return LiveRule(self, self._native.add_rule(selector.arena()))

    @property
    def native(self) -> Any:
        """The core's session (for the kit's own helpers)."""
        return self._native

    @property
    def open_calls(self) -> Dict[int, List[int]]:
        """Module id → the call numbers open now (``ROOT_CALL`` for the root call)."""
        return self._open_calls

    def open_module_calls(self, addresses: Dict[int, str]) -> List[str]:
        """The module calls open now, outermost first, as ``address:call`` (the names a trace's
        ops carry in ``module_stack``); the root call and modules without an address left out."""
        return [
            f"{addresses[module_id]}:{calls[-1]}"
            for module_id, calls in self._open_calls.items()
            if calls and module_id in addresses and addresses[module_id] != "self"
        ]

    def without_call_tracking(self) -> None:
        """The adapter says nothing of this capture asks which module calls are open (no live
        edits; ``open_calls`` and ``module_stack`` go unread): without a narrow ``save=`` either,
        :meth:`enter` and :meth:`exit` then only report the calls. Call before the forward."""
        if self._selector is None:
            self._tracks_calls = False

    def enter(self, module_id: int) -> None:
        """A module call starts."""
        self._native.enter(module_id)
        if not self._tracks_calls:
            pass
        elif module_id == self._root_module and not self._root_entered and self._depth == 1:
            # The root's own call is the one already open (as the core counts it).
            self._root_entered = True
            self._call_counts[module_id] = 1
        else:
            call_counts = self._call_counts
            number = call_counts.get(module_id, 0) + 1
            call_counts[module_id] = number
            calls = self._open_calls.get(module_id)
            if calls is None:
                self._open_calls[module_id] = [number]
            else:
                calls.append(number)
            self._depth += 1
        self._unsent += 1
        if self._unsent >= EVENTS_PER_BATCH:
            self.flush()

    def exit(self, module_id: int, outputs: List[int], values: Optional[Sequence[Any]] = None) -> None:
        """A module call ends, returning the values ``outputs`` (``values``, when given, are
        the objects themselves: an output the plan selects at the exit whose payload was
        released before, e.g. a value passed through the call unchanged, is held again)."""
        self._native.exit(module_id, outputs)
        if not self._tracks_calls:
            self._unsent += 1
            if self._unsent >= EVENTS_PER_BATCH:
                self.flush()
            return
        is_root = self._depth == 1
        call_number = 1
        if not is_root:
            calls = self._open_calls.get(module_id)
            if calls:
                call_number = calls.pop()
            self._depth -= 1
        plan = self._plan
        if plan is None:
            self._unsent += 1
            if self._unsent >= EVENTS_PER_BATCH:
                self.flush()
            return
        # A call a module boundary term matches: the core answers for its outputs now.
        if plan.boundaries and plan.is_boundary(module_id, call_number, is_root):
            self.flush()
            if values is not None and self.missed:
                for value_id, value in zip(outputs, values):
                    if value_id in self.missed:
                        self.missed.discard(value_id)
                        self.payloads[value_id] = self.hold(value_id, value)
        else:
            self._sent()

    def output(self, name: str, value_id: int) -> None:
        """A model output (``name`` is its path in the returned structure)."""
        self._native.output(name, value_id)
        self._op_count += 1
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
        self.stopped = True
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

    def decide_value(self, value_id: int, selected: bool) -> None:
        """A value-dependent ``save=`` decided by the adapter on the concrete value, right after
        ``op`` reported it: a rejected value is dropped at once."""
        if selected:
            self.selected.add(value_id)
        elif value_id not in self.leaf_values:
            self.payloads.pop(value_id, None)

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
        """The core's answers are the authority: a selected value stays (or is recorded as
        missed when its payload is gone), a rejected value's payload is dropped at once."""
        undecided = self._undecided
        for value_id, selected in decisions:
            if undecided.pop(value_id, None) is not None:
                self._if_unnamed.pop(value_id, None)
                self._watchers.pop(value_id, None)
            if selected:
                self.selected.add(value_id)
                has_bytes = self._keep_outputs and value_id not in self._without_bytes
                if has_bytes and value_id not in self.payloads:
                    self.missed.add(value_id)
            else:
                self.selected.discard(value_id)
                if value_id not in self.leaf_values:
                    self.payloads.pop(value_id, None)
        windows = self._windows
        while windows and windows[0][1] not in undecided:
            windows.popleft()
        if windows and windows[0][0] <= self._op_count:
            # The core could not answer yet (it counts ops its own way): ask again next op.
            windows[0] = (self._op_count + 1, windows[0][1])

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

        native_trace, decisions = self._native.finish()
        self._close()
        self._apply(decisions)
        save = self.request.save
        if save.mode == "selected":
            kept = (self.selected - self.missed) | self.leaf_values
            for value_id in [value_id for value_id in self.payloads if value_id not in kept]:
                del self.payloads[value_id]
            native_trace.keep_payloads(sorted(self.payloads))
            if not self.selected and save.selector is not None:
                # one more frame: warn_matched_nothing itself
                warn_matched_nothing(save.selector, stacklevel=user_stacklevel() + 1)
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
        if self.spool is not None:
            finish_streamed(trace, self.spool, self.request.streaming.source_paths)
        if self.missed and save.mode == "selected":
            _warn_missed(trace, self.missed)
        if self.request.stop_after is not None and not self.stopped:
            warnings.warn(
                f"stop_after={self.request.stop_after.selector!r} matched no op, so the whole forward "
                "ran; check the labels with trace.labels or trace.summary()",
                SelectorMatchedNothingWarning,
                stacklevel=user_stacklevel(),
            )
        if not trace.capture_verified:
            warnings.warn(
                f"the capture may be incomplete: {trace.capture_reason}",
                CaptureUnverifiedWarning,
                stacklevel=user_stacklevel(),
            )
        return trace

    def abort(self) -> None:
        """Abandons the capture: the core frees the session, every payload is dropped."""
        if self._open:
            self._close()
            self._native.abandon()
        if self.spool is not None:
            self.spool.discard()
        self.payloads = {}
        self.selected.clear()
        self._undecided.clear()
        self._if_unnamed.clear()
        self._watchers.clear()

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
        # The trace owns the payloads now. The session sits in reference cycles with the
        # adapter's capture objects (``hold`` is one of their methods), which only the cyclic
        # collector frees: holding the values here too would keep a dropped trace's memory alive
        # until a collection runs, and the next capture would allocate beside it.
        self.payloads = {}
        self.hold = _hold_as_is
        self._watchers.clear()


def _open_spool(
    request: CaptureRequest, payload_bytes: Optional[Callable[[Any], memoryview]]
) -> PayloadSpool:
    """The spool of a streamed capture, or a typed refusal."""
    if payload_bytes is None:
        # The gate admitted streaming, but the adapter did not hand its payload codec over.
        raise BackendUnsupportedError(
            f"the {request.framework} adapter does not stream payloads",
            "streaming_unsupported",
            "save the trace with trace.save after the capture instead",
            framework=request.framework,
        )
    try:
        return PayloadSpool(request.streaming.target, payload_bytes)
    except OSError as error:
        raise UnsupportedError(
            f"cannot write the streamed trace beside {request.streaming.target!r}: {error}",
            "streaming_path_invalid",
            "pass a path in an existing folder you can write to",
        ) from error


def _warn_missed(trace: Any, missed: Set[int]) -> None:
    """Says which matched ops lost their values before the core could select them."""
    labels = [op.label for op in trace.ops if op._info.get("value") in missed]
    trace.selection_missed = labels
    warnings.warn(
        f"{len(labels)} op(s) matched save= but their values were released before the selection "
        f"could be decided, so they are not saved: {', '.join(labels[:10])}; select them with a "
        "term the plan decides at the op (tl.func, tl.in_module, a label) or save everything",
        SelectionIncompleteWarning,
        stacklevel=user_stacklevel(),
    )


def _hold_as_is(value_id: int, value: Any) -> Any:
    return value


def open_session_count() -> int:
    """Capture sessions of this process that are neither finished nor aborted (a capture that
    raised must leave none behind)."""
    return len(_OPEN_SESSIONS)
