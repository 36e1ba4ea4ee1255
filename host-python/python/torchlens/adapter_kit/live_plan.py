"""The adapter's side of a live selection plan: the core compiles the ``save=`` selector into a
small tree of terms keyed by the adapter's own module ids (``capture-session.live-plan``); this
module turns that tree into one Python function the capture session calls on every op output as
the op returns, with no call into the core.

The answer is a Kleene value with a reason when it is unknown:

- ``SELECTED`` / ``REJECTED``: decided from the op's own record (function name, open module
  calls);
- otherwise a bit set of what the answer waits for: ``WAIT_CORE`` (a label or a look-back term:
  the core decides as soon as it groups the op, so the session sends its events at once),
  ``WAIT_EXIT`` (a module boundary: decided when the enclosing matching call exits, or as soon
  as the adapter can no longer name the value as that call's output), ``WAIT_WINDOW`` (a
  ``followed_by`` term: decided ``within`` ops later), ``WAIT_GRAPH`` (an influence term,
  ``tl.downstream_of`` / ``tl.upstream_of``: the core decides from the dataflow graph with a
  later batch, so nothing is sent early; an upstream term may wait for the end of the capture)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .._core import core

REJECTED = 0
SELECTED = 1
WAIT_CORE = 2
WAIT_EXIT = 4
WAIT_WINDOW = 8
WAIT_GRAPH = 16

#: Key of the root call in ``open_calls``: the root may never have been declared by the adapter.
ROOT_CALL = -1

#: ``decide(func_name, open_calls, named)``: ``open_calls`` maps module id (``ROOT_CALL`` for the
#: root) to the call numbers open now; ``named`` says whether the adapter can still name the
#: value as a call's output.
Decide = Callable[[str, Dict[int, List[int]], bool], int]

#: Characters only a label's numbers carry (``_type_step:pass``).
_NUMBER_CHARACTERS = frozenset("0123456789_:")


def _and(parts: Sequence[Decide]) -> Decide:
    def decide(func: str, open_calls: Dict[int, List[int]], named: bool) -> int:
        waits = 0
        for part in parts:
            answer = part(func, open_calls, named)
            if answer == REJECTED:
                return REJECTED
            if answer != SELECTED:
                waits |= answer
        return waits or SELECTED

    return decide


def _or(parts: Sequence[Decide]) -> Decide:
    def decide(func: str, open_calls: Dict[int, List[int]], named: bool) -> int:
        waits = 0
        for part in parts:
            answer = part(func, open_calls, named)
            if answer == SELECTED:
                return SELECTED
            waits |= answer
        return waits  # REJECTED (0) when every part rejected

    return decide


def _not(inner: Decide) -> Decide:
    def decide(func: str, open_calls: Dict[int, List[int]], named: bool) -> int:
        answer = inner(func, open_calls, named)
        if answer == SELECTED:
            return REJECTED
        if answer == REJECTED:
            return SELECTED
        return answer

    return decide


def _waiting(first: Decide, wait: int) -> Decide:
    """A temporal term: the core answers, unless ``first`` already rejects the op."""

    def decide(func: str, open_calls: Dict[int, List[int]], named: bool) -> int:
        answer = first(func, open_calls, named)
        if answer == REJECTED:
            return REJECTED
        return wait | (answer if answer != SELECTED else 0)

    return decide


OpenCalls = Dict[int, List[int]]


def _inside(modules: Sequence[int], root: bool, call: Optional[int]) -> Callable[[OpenCalls], bool]:
    """Whether a matching call is open, over the session's ``open_calls``."""
    keys = tuple(modules) + ((ROOT_CALL,) if root else ())

    def inside(open_calls: Dict[int, List[int]]) -> bool:
        for key in keys:
            calls = open_calls.get(key)
            if calls and (call is None or call in calls):
                return True
        return False

    return inside


class LivePlan:
    """A live plan ready for the hot path: ``decide`` answers for one op output; ``window`` is
    the widest ``followed_by`` look-ahead; ``boundaries`` are the module boundary terms (the
    session sends its events when a call they match exits, so the core answers for the
    call's outputs there)."""

    def __init__(self, nodes: Sequence[tuple], root: int, op_type_of: Callable[[str], str]) -> None:
        self.window = 0
        #: The module boundary terms, as (module ids, root call matches, call number or None).
        self.boundaries: List[Tuple[frozenset, bool, Optional[int]]] = []
        built: List[Decide] = []
        for node in nodes:
            built.append(self._build(node, built, op_type_of))
        decide = built[root]
        if not any(node[0] in ("in_module", "module_output") for node in nodes):
            # Only the function name matters: one evaluation per distinct name per capture.
            decide = _per_function(decide)
        self.decide: Decide = decide

    def _build(self, node: tuple, built: List[Decide], op_type_of: Callable[[str], str]) -> Decide:
        kind = node[0]
        if kind == "func":
            name, wanted = node[1], node[2]
            return lambda func, open_calls, named: (
                SELECTED if func == name or op_type_of(func) == wanted else REJECTED
            )
        if kind == "in_module":
            inside = _inside(node[1], node[2], node[3])
            return lambda func, open_calls, named: SELECTED if inside(open_calls) else REJECTED
        if kind == "module_output":
            inside = _inside(node[1], node[2], node[3])
            self.boundaries.append((frozenset(node[1]), node[2], node[3]))
            return lambda func, open_calls, named: WAIT_EXIT if named and inside(open_calls) else REJECTED
        if kind == "label":
            wanted = node[1]
            return lambda func, open_calls, named: WAIT_CORE if op_type_of(func) == wanted else REJECTED
        if kind == "label_contains":
            needle = node[1]
            return lambda func, open_calls, named: _label_contains(needle, op_type_of(func))
        if kind == "and":
            return _and([built[index] for index in node[1]])
        if kind == "or":
            return _or([built[index] for index in node[1]])
        if kind == "not":
            return _not(built[node[1]])
        if kind == "followed_by":
            self.window = max(self.window, node[2])
            return _waiting(built[node[1]], WAIT_WINDOW)
        if kind == "preceded_by":
            return _waiting(built[node[1]], WAIT_CORE)
        if kind == "graph":
            return lambda func, open_calls, named: WAIT_GRAPH
        raise ValueError(f"unknown live plan node {kind!r}")

    def is_boundary(self, module_id: int, call_number: int, is_root: bool) -> bool:
        """Whether a module boundary term matches this call (the session asks as it exits)."""
        for modules, root, call in self.boundaries:
            if (module_id in modules or (root and is_root)) and (call is None or call == call_number):
                return True
        return False


def _per_function(decide: Decide) -> Decide:
    answers: Dict[str, int] = {}

    def cached(func: str, open_calls: OpenCalls, named: bool) -> int:
        answer = answers.get(func)
        if answer is None:
            answer = answers[func] = decide(func, open_calls, named)
        return answer

    return cached


def _label_contains(needle: str, op_type: str) -> int:
    """Every label is ``{op_type}_{type}_{step}`` with an optional ``:pass``: a needle inside the
    op type matches; one that could end in the numbers waits for the core; any other cannot."""
    if needle in op_type:
        return SELECTED
    for split in range(len(needle)):
        if op_type.endswith(needle[:split]) and _NUMBER_CHARACTERS.issuperset(needle[split:]):
            return WAIT_CORE
    return REJECTED


class OpTypes:
    """The core's normalized op type of each function name, asked once per name per process
    (``func`` and label terms compare it on every op)."""

    _known: Dict[str, str] = {}

    @classmethod
    def of(cls, func_name: str) -> str:
        op_type = cls._known.get(func_name)
        if op_type is None:
            op_type = cls._known[func_name] = core().op_type(func_name)
        return op_type


def compile_live_plan(plan: Optional[Tuple[Sequence[tuple], int]]) -> Optional[LivePlan]:
    """The session's plan from the core's ``live_plan()`` answer (None without one)."""
    if plan is None:
        return None
    nodes, root = plan
    return LivePlan(nodes, root, OpTypes.of)


class LiveRule:
    """A static selector decided op by op while the capture runs: what an ``intervene=`` or
    ``stop_after=`` rule needs to act on an op as it happens. Made by
    :meth:`CaptureSession.rule <torchlens.adapter_kit.CaptureSession.rule>`.

    ``at_op`` answers from the op's own record where the plan can (no call into the core); a
    label or look-back term sends the pending events and asks the core, which knows the op's
    label as soon as it has the op. A module boundary term (``tl.module``) is only decided when
    the call exits: ``at_op`` returns None and ``at_exit`` names the outputs it matches."""

    def __init__(self, session: Any, index: int) -> None:
        self._session = session
        self._index = index
        self._plan: Optional[LivePlan] = None
        self._generation = -1

    def _current_plan(self) -> LivePlan:
        session = self._session
        if self._plan is None or self._generation != session.module_generation:
            session.flush()  # the core compiles against the modules it has
            nodes, root = session.native.rule_plan(self._index)
            self._plan = LivePlan(nodes, root, OpTypes.of)
            self._generation = session.module_generation
        return self._plan

    @property
    def waits_for_exits(self) -> bool:
        """Whether a module boundary term can make the rule match at a call's exit."""
        return bool(self._current_plan().boundaries)

    def at_op(self, func_name: str, value_id: int) -> Optional[bool]:
        """Whether the rule matches the op that just produced ``value_id`` (report it with
        ``session.op`` first); None when only an enclosing call's exit can decide."""
        session = self._session
        answer = self._current_plan().decide(func_name, session.open_calls, True)
        if answer == SELECTED:
            return True
        if answer == REJECTED:
            return False
        if not answer & (WAIT_CORE | WAIT_WINDOW | WAIT_GRAPH):
            return None
        session.flush()
        return session.native.rule_matches(self._index, value_id)

    def at_exit(self, value_ids: Sequence[int]) -> List[int]:
        """The outputs of the call that just exited (report it with ``session.exit`` first)
        that the rule matches."""
        session = self._session
        session.flush()
        return [value_id for value_id in value_ids if session.native.rule_matches(self._index, value_id)]
