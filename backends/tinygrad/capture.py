"""One capture of a tinygrad forward: record every tensor-visible UOp while the lazy graph is
built (nothing is realized), then realize every recorded value in one evaluation.

Two choke points see every Tensor tinygrad builds: ``Tensor.__init__`` and
``Tensor._apply_uop`` (both on 0.13 and 0.14). A new Tensor whose UOp is not yet recorded
becomes one op: its parents are the nearest recorded values below it in the UOp graph (inputs,
parameters, earlier ops, and constants: Tensors that existed before the forward). Literal
subgraphs (``x + 1``'s ``1``, shape arguments) have no recorded parent and stay inside the op
that consumes them. Named literal producers (``Tensor.ones``, ``arange``, ...) are recorded
under their own name with no parents; a ``Tensor(list)`` built in the forward is a ``tensor``
literal producer. tinygrad hash-conses UOps: a UOp built again keeps its first record (and its
first module attribution).

Replay re-runs an op by substituting its parents' UOps with the given values in the recorded
UOp and realizing the result."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tinygrad import Tensor, helpers
from tinygrad.tensor import all_tensors

from torchlens.adapter_kit.recorder import Recorder as KitRecorder
from torchlens.adapter_kit.replay import ParamRef, ReplayRecord, ValueRef, snapshot

from . import refusals
from .dtypes import is_weak, neutral_name

#: Literal producers recorded under their own name (the spec's ``Tensor.ones`` inside the
#: forward). ``*_like`` functions read their argument's shape and dtype only.
NAMED_CREATIONS = (
    "ones",
    "zeros",
    "full",
    "empty",
    "arange",
    "eye",
    "linspace",
    "ones_like",
    "zeros_like",
    "full_like",
    "empty_like",
)


class Substitute:
    """Re-runs one recorded op: its UOp with each parent UOp replaced by a new value's UOp."""

    __slots__ = ("uop", "parents")

    def __init__(self, uop: Any, parents: Sequence[Any]) -> None:
        self.uop, self.parents = uop, tuple(parents)

    def __call__(self, *values: Any) -> Any:
        if not self.parents:
            return Tensor(self.uop)
        mapping = {parent: value.uop for parent, value in zip(self.parents, values)}
        return Tensor(self.uop.substitute(mapping))


def uop_name(uop: Any) -> str:
    """The op name of a UOp: ``add``, ``cmplt``, ``reshape``; reductions name their operator
    (``reduce_add``, ``reduce_max``)."""
    name = uop.op.name.lower()
    if name in ("reduce", "reduce_axis"):
        arg = uop.arg
        first = arg[0] if isinstance(arg, tuple) and arg else arg
        operator = getattr(first, "name", None)
        if operator:
            return f"reduce_{operator.lower()}"
    return name


def shape_of(uop: Any) -> Tuple[int, ...]:
    return tuple(int(extent) for extent in uop.shape)


class Recorder(KitRecorder):
    """The capture's state: the kit's recorder, with identity by UOp (tinygrad hash-conses
    them: one graph node is one value) and each value held as a Tensor of its UOp (lazy until the
    pipeline's ``realize_all``)."""

    array_type = Tensor

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        #: UOp → value id (inputs, parameters, constants, ops).
        self.known: Dict[Any, int] = {}
        #: UOps of every Tensor alive before the forward (constants when the forward reads them).
        self.preexisting: set = set()

    # ---- tinygrad's facts ------------------------------------------------------------------

    def dtype_of(self, value: Any) -> str:
        return neutral_name(value.uop.dtype)

    def shape_of(self, value: Any) -> Tuple[int, ...]:
        return shape_of(value.uop)

    def is_trainable(self, param: Any) -> bool:
        return getattr(param, "requires_grad", None) is not False

    def known_id(self, value: Any) -> Optional[int]:
        return self.known.get(value.uop)

    def retag(self, value_id: int, value: Any) -> None:
        # A UOp built again keeps its first record.
        self.known.setdefault(value.uop, value_id)

    def held_value(self, value: Any) -> Any:
        """A Tensor of the value's UOp: what the capture keeps and realizes, never the user's
        own Tensor."""
        return self._hold(value.uop)

    def _hold(self, uop: Any) -> Any:
        with self.quiet():  # the holder is no op of the forward
            return Tensor(uop)

    outside_value = held_value

    def snapshot(self) -> None:
        """Remembers the UOps of every live Tensor: what the forward reads from outside."""
        for ref in list(all_tensors):
            tensor = ref()
            if tensor is not None:
                self.preexisting.add(tensor.uop)

    # ---- ops --------------------------------------------------------------------------------

    def _reference_of(self, value_id: int) -> ValueRef:
        return ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    def frontier(self, uop: Any) -> List[Tuple[int, int, Any]]:
        """The nearest recorded values below ``uop``: ``(value id, argument position, UOp)``.
        A Tensor's UOp that existed before the forward is declared as a constant here."""
        found: List[Tuple[int, int, Any]] = []
        seen: set = set()
        known, preexisting = self.known, self.preexisting
        for position, source in enumerate(uop.src):
            stack = [source]
            while stack:
                node = stack.pop()
                if node in seen:
                    continue
                seen.add(node)
                value_id = known.get(node)
                if (
                    value_id is None
                    and node in preexisting
                    and node.device is not None
                    and not is_weak(node.dtype)
                ):
                    value_id = self.declare_outside(self._hold(node))
                if value_id is not None:
                    found.append((value_id, position, node))
                    continue
                stack.extend(node.src)
        return found

    def observe(self, tensor: Any, literal_data: bool = False) -> None:
        """Records a Tensor the forward built, unless its UOp is recorded already or it is a
        literal subgraph (no recorded parent, no storage of its own)."""
        uop = tensor.uop
        if uop in self.known or uop.device is None or is_weak(uop.dtype):
            return
        parents = self.frontier(uop)
        if not parents and not literal_data:
            return
        func = "tensor" if literal_data and not parents else uop_name(uop)
        self._record(uop, func, parents)

    def _record(
        self, uop: Any, func: str, parents: List[Tuple[int, int, Any]], record: Optional[ReplayRecord] = None
    ) -> int:
        value_id = self.session.new_value_id()
        self.known[uop] = value_id
        holder = self._hold(uop)
        self.values[value_id] = holder
        if record is None:
            record = ReplayRecord(
                call=Substitute(uop, [node for _, _, node in parents]),
                func_name=func,
                args=tuple(self._reference_of(value_id_) for value_id_, _, _ in parents),
            )
        self.records[value_id] = record
        self.session.op(
            func,
            [(value_id_, position) for value_id_, position, _ in parents],
            [(value_id, holder, shape_of(uop), neutral_name(uop.dtype))],
        )
        return value_id

    def observe_named(
        self, name: str, call: Callable[..., Any], tensor: Any, args: tuple, kwargs: dict
    ) -> None:
        """Records the result of a named creation (``Tensor.ones``) under its own name; its
        parents are its Tensor arguments (``ones_like``'s model), not the UOp graph."""
        if not isinstance(tensor, Tensor):
            return
        uop = tensor.uop
        if uop in self.known or uop.device is None or is_weak(uop.dtype):
            return
        parents: List[Tuple[int, int, Any]] = []
        template: List[Any] = []
        for position, argument in enumerate(args):
            value_id = self.known.get(argument.uop) if isinstance(argument, Tensor) else None
            if value_id is not None:
                parents.append((value_id, position, argument.uop))
                template.append(self._reference_of(value_id))
            else:
                template.append(snapshot(argument))
        record = ReplayRecord(call=call, func_name=name, args=tuple(template), kwargs=snapshot(kwargs))
        self._record(uop, name, parents, record)

    def value_id_of(self, tensor: Any) -> Optional[int]:
        """The value id of a Tensor the forward returned (recording a literal one now)."""
        uop = tensor.uop
        value_id = self.known.get(uop)
        if value_id is None:
            if uop.device is None or is_weak(uop.dtype):
                return None
            value_id = self._record(uop, uop_name(uop), self.frontier(uop))
        return value_id

    # ---- hooks -----------------------------------------------------------------------------

    def install(self, patches: Any) -> None:
        """Wraps tinygrad for the owner thread until the capture ends."""
        recorder = self

        def wrap_init(original: Callable[..., Any]) -> Callable[..., Any]:
            def init(tensor: Any, data: Any = None, *args: Any, **kwargs: Any) -> None:
                original(tensor, data, *args, **kwargs)
                if not recorder.depth:
                    recorder.observe(tensor, literal_data=_is_data(data))

            return init

        def wrap_apply(original: Callable[..., Any]) -> Callable[..., Any]:
            def apply(tensor: Any, *args: Any, **kwargs: Any) -> Any:
                result = original(tensor, *args, **kwargs)
                if not recorder.depth:
                    recorder.observe(result)
                return result

            return apply

        refusing = self.refusing_wrapper
        _install(patches, Tensor, "__init__", wrap_init)
        _install(patches, Tensor, "_apply_uop", wrap_apply)
        _install(patches, Tensor, "realize", refusing(refusals.realize))
        _install(patches, Tensor, "assign", refusing(lambda: refusals.assign("Tensor.assign")))
        _install(patches, Tensor, "replace", refusing(lambda: refusals.assign("Tensor.replace")))
        _install(patches, Tensor, "__setitem__", refusing(lambda: refusals.assign("setitem")))
        _install(patches, Tensor, "_next_counter", lambda original: _raiser(refusals.rng))
        _install(patches, refusals.tinyjit_class(), "__call__", lambda original: _raiser(refusals.jit))
        for name in NAMED_CREATIONS:
            if hasattr(Tensor, name):
                _install(patches, Tensor, name, self._named(name))

    def _named(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def create(*args: Any, **kwargs: Any) -> Any:
                recorder.depth += 1
                try:
                    result = original(*args, **kwargs)
                finally:
                    recorder.depth -= 1
                if not recorder.depth:
                    recorder.observe_named(name, original, result, args, kwargs)
                return result

            return create

        return make


def training_mode() -> bool:
    """Whether tinygrad is in training mode (``Tensor.training`` on 0.13, the ``TRAINING``
    context variable on 0.14)."""
    flag = getattr(helpers, "TRAINING", None)
    return bool(getattr(Tensor, "training", False)) or bool(getattr(flag, "value", 0))


def _is_data(data: Any) -> bool:
    """Whether ``Tensor(data)`` builds storage from Python or NumPy data (a ``tensor`` literal
    producer), rather than wrapping a UOp or a scalar literal."""
    if isinstance(data, (list, tuple, bytes)):
        return True
    return type(data).__module__ == "numpy" and getattr(data, "ndim", 0) > 0


def _raiser(error: Callable[[], Exception]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise error()

    return refuse


def _install(
    patches: Any, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> None:
    """``patches.wrap`` that keeps a static or class method static on the class."""
    raw = inspect.getattr_static(owner, name)
    original = getattr(owner, name)
    wrapped = patches.for_owner_thread(make(original), original)
    if isinstance(raw, (staticmethod, classmethod)):
        wrapped = staticmethod(wrapped)
    patches.replace(owner, name, wrapped)
