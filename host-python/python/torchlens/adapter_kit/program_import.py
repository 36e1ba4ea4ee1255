"""Importing a program the framework has already traced (a graph of ops it can read before any
runs) as a capture, by running it op by op on concrete values. A backend reads its own program
format and hands each op here; the kit keeps what every such import needs: the runtime value of
every id (replay and derived gradients read these, whatever ``save=`` keeps public), the
parameters, how replay re-runs each value's op (templates with :class:`ValueRef` /
:class:`ParamRef` in place of the op's inputs), constants, inputs, opaque ops, regions (one
boundary op and one projection per output) and outputs.

Values travel as pairs ``(value, value id)``; a literal (an argument no op produced) has the id
None. A program compiled to a flat slot frame (:class:`Program`) runs through
:meth:`ProgramImport.run_program`, which hands every instruction it cannot run itself (control
flow, a nested program decided at run time) to the backend's :meth:`ProgramImport.nested`."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .replay import ParamRef, ReplayRecord, ValueRef, fill
from .session import CaptureSession

Pair = Tuple[Any, Optional[int]]

#: Instruction kinds of a :class:`Program`.
OP, CONSTANT, NESTED = 0, 1, 2


class Step:
    """One prepared op of a :class:`Program`: its recorded name, what replay calls, its
    attributes and, where the program's types say so, each output's ``(shape, dtype)``
    (``described``; None: described from the values). ``run(values, fast)`` computes its outputs
    (a list); ``fast`` is the import's :attr:`ProgramImport.fast`."""

    __slots__ = ("name", "replay", "attributes", "described")

    def run(self, values: list, fast: bool) -> list:
        raise NotImplementedError


class Program:
    """A program compiled once onto a flat frame of slots. ``code`` holds tuples:

    - ``(OP, step, in_slots, out_slots)``: a prepared :class:`Step`;
    - ``(CONSTANT, value, slot)``: a constant declared where the walk meets it;
    - ``(NESTED, item, in_slots, out_slots)``: handed to :meth:`ProgramImport.nested`.

    ``out_slots`` hold None for dropped outputs. Literals live in slots filled before the run
    (``literals``: ``(slot, (value, None))``)."""

    __slots__ = ("size", "const_slots", "in_slots", "out_slots", "literals", "code")

    def __init__(self) -> None:
        self.size = 0
        self.const_slots: List[int] = []
        self.in_slots: List[int] = []
        self.out_slots: List[int] = []
        self.literals: List[Tuple[int, Pair]] = []
        self.code: List[tuple] = []

    def slot(self) -> int:
        """A fresh slot."""
        self.size += 1
        return self.size - 1

    def literal(self, value: Any) -> int:
        """A slot holding a literal argument."""
        slot = self.slot()
        self.literals.append((slot, (value, None)))
        return slot


class ProgramImport:
    """One import around the shared session. A backend sets :attr:`array_type` and
    :meth:`describe`, and overrides :meth:`as_value`, :meth:`tag_attributes` and :meth:`nested`
    where its program needs them. Every key is a value id of the session."""

    #: The framework's array type (an op output of another type goes through :meth:`as_value`).
    array_type: Any = object
    #: Whether prepared steps may take their fast path (see :meth:`Step.run`).
    fast = False

    def __init__(self, session: CaptureSession) -> None:
        self.session = session
        #: Value id → its runtime value.
        self.values: Dict[int, Any] = {}
        #: Value id → parameter, and its neutral dtype.
        self.params: Dict[int, Any] = {}
        self.param_dtypes: Dict[int, str] = {}
        #: Value id → how replay re-runs the op that produced it.
        self.records: Dict[int, ReplayRecord] = {}
        #: Ids of values whose producer the import never saw (``ReplayRuntime.unresolved``).
        self.unresolved: Set[int] = set()

    # ---- the backend's reading of values -----------------------------------------------------

    def describe(self, value: Any) -> Tuple[Sequence[int], str]:
        """A value's shape and neutral dtype as the trace records them."""
        raise NotImplementedError

    def as_value(self, value: Any) -> Any:
        """A value as the framework's array (a constant, or an op that handed back a literal)."""
        return value

    def tag_attributes(
        self, attributes: Sequence[Tuple[str, str]], pairs: List[Pair]
    ) -> Sequence[Tuple[str, str]]:
        """An op's attributes once its outputs are known (a backend may add facts about them)."""
        return attributes

    def nested(self, item: Any, ins: List[Pair]) -> List[Pair]:
        """Runs a :data:`NESTED` instruction of a :class:`Program` on its inputs."""
        raise NotImplementedError

    # ---- values and declarations -------------------------------------------------------------

    def reference(self, value: Any, value_id: Optional[int]) -> Any:
        """What a replay template holds for one argument: the literal itself, or a reference."""
        if value_id is None:
            return value
        return ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    def new_value(self, value: Any) -> Tuple[int, Sequence[int], str]:
        """A fresh id for ``value``, remembered as its runtime value; its shape and dtype."""
        value_id = self.session.new_value_id()
        self.values[value_id] = value
        shape, dtype = self.describe(value)
        return value_id, shape, dtype

    def param(self, address: str, module: int, value: Any, trainable: bool = True) -> Pair:
        """A parameter owned by module ``module`` (its runtime value is the parameter itself)."""
        value_id = self.session.new_value_id()
        shape, dtype = self.describe(value)
        self.params[value_id] = value
        self.param_dtypes[value_id] = dtype
        self.session.param(value_id, address, module, shape, dtype, trainable)
        return value, value_id

    def input(self, name: str, value: Any) -> Pair:
        """A model input."""
        value_id, shape, dtype = self.new_value(value)
        self.session.input(name, value_id, value, shape, dtype)
        return value, value_id

    def constant(self, value: Any) -> Tuple[Any, int]:
        """A value read from outside the program (a closure array, a constant op)."""
        value = self.as_value(value)
        value_id, shape, dtype = self.new_value(value)
        self.session.constant(value_id, value, shape, dtype)
        return value, value_id

    def output(self, name: str, pair: Pair, copy: Optional[Callable[[Any], list]] = None) -> None:
        """A program output. A literal becomes a constant; a parameter returned as it is reads it
        through one recorded ``copy`` op (``copy(value)`` gives ``[its copy]``), because the
        core's outputs are values the trace computed."""
        value, found = pair
        if found is None:
            value, value_id = self.constant(value)
        elif found in self.params and copy is not None:
            reason = [("reason", "output_is_parameter")]
            value, copied = self.op("copy", [pair], copy(value), reason, copy)[0]
            # The copy has the parameter's value, so the op always gives it an id.
            value_id = copied if copied is not None else found
        else:
            value_id = found
        self.session.output(name, value_id)

    # ---- ops ---------------------------------------------------------------------------------

    def _parents(self, ins: Sequence[Pair]) -> list:
        return [(value_id, position) for position, (_, value_id) in enumerate(ins) if value_id is not None]

    def op(
        self,
        name: str,
        ins: Sequence[Pair],
        values: Sequence[Any],
        attributes: Sequence[Tuple[str, str]] = (),
        call: Any = None,
        keywords: Optional[dict] = None,
        described: Optional[Sequence[Tuple[Sequence[int], str]]] = None,
        indexed: bool = True,
        keep: bool = True,
        reason: str = "opaque_region",
    ) -> List[Pair]:
        """One op reading ``ins`` and giving ``values`` (one per output; None where the import
        has no value). Replay calls ``call`` with the inputs in place (``call(*args)``, or
        ``call(**keywords)`` with every input found in ``keywords`` by identity replaced) and
        takes output ``index`` (``indexed=False``: a single output is the call's whole result);
        ``call=None`` records an opaque op (``reason``). ``described`` gives each output's
        ``(shape, dtype)`` where values cannot."""
        if keywords is None:
            args: tuple = tuple(self.reference(value, value_id) for value, value_id in ins)
            kwargs: dict = {}
        else:
            args, kwargs = (), {key: self._by_identity(item, ins) for key, item in keywords.items()}
        outputs = []
        pairs: List[Pair] = []
        array_type = self.array_type
        whole = not indexed and len(values) == 1
        for index, value in enumerate(values):
            if value is not None and not isinstance(value, array_type):
                value = self.as_value(value)
            value_id = self.session.new_value_id()
            if value is not None:
                self.values[value_id] = value
            shape, dtype = self.describe(value) if described is None else described[index]
            outputs.append((value_id, value, shape, dtype))
            if call is None:
                self.records[value_id] = ReplayRecord(None, name, opaque=True, region_reason=reason)
            else:
                self.records[value_id] = ReplayRecord(call, name, args, kwargs, None if whole else index)
            pairs.append((value, value_id))
        attributes = self.tag_attributes(attributes, pairs)
        self.session.op(name, self._parents(ins), outputs, False, attributes, None, keep=keep)
        return pairs

    def _by_identity(self, item: Any, ins: Sequence[Pair]) -> Any:
        if isinstance(item, list):
            return [self._by_identity(sub, ins) for sub in item]
        for value, value_id in ins:
            if value is item and value_id is not None:
                return self.reference(value, value_id)
        return item

    def step(self, step: Step, ins: Sequence[Pair], values: list, frame: list, out_slots: list) -> None:
        """:meth:`op` for a prepared step whose outputs its program describes (the hot path of
        an import): no per-output description or conversion calls beyond the array check; each
        output's pair goes straight to its slot of ``frame`` (None: dropped)."""
        session = self.session
        params = self.params
        parents = []
        template = []
        for position, (value, value_id) in enumerate(ins):
            if value_id is None:
                template.append(value)
            else:
                parents.append((value_id, position))
                template.append(ParamRef(value_id) if value_id in params else ValueRef(value_id))
        arguments = tuple(template)
        outputs = []
        name, replay = step.name, step.replay
        values_by_id, records, array_type = self.values, self.records, self.array_type
        for index, (value, (shape, dtype), slot) in enumerate(zip(values, step.described, out_slots)):
            if not isinstance(value, array_type):
                value = self.as_value(value)
            value_id = session.new_value_id()
            values_by_id[value_id] = value
            outputs.append((value_id, value, shape, dtype))
            records[value_id] = ReplayRecord(replay, name, arguments, {}, index)
            if slot is not None:
                frame[slot] = (value, value_id)
        session.op(name, parents, outputs, False, step.attributes, None)

    def region(
        self,
        name: str,
        ins: Sequence[Pair],
        call: Callable[..., list],
        attributes: Sequence[Tuple[str, str]],
        describe_missing: Callable[[int], Tuple[Sequence[int], str]],
    ) -> List[Pair]:
        """A region replay cannot check op by op: one boundary op (its output a token with no
        value, opaque to replay) and one ``region_output`` op per output of ``call`` run on the
        inputs. Each projection is replayed by re-running the whole region from the boundary's
        parents and taking its output (the region's seams). ``describe_missing(index)`` describes
        an output that is not an array."""
        session = self.session
        values = call(*[value for value, _ in ins])
        parents = self._parents(ins)
        template = tuple(self.reference(value, value_id) for value, value_id in ins)
        token = session.new_value_id()
        attributes = [("region", "true")] + list(attributes)
        session.op(name, parents, [(token, None, [], "region_token")], False, attributes, None, keep=False)
        self.records[token] = ReplayRecord(call, name, template, opaque=True)
        pairs = []
        for index, value in enumerate(values):
            value_id = session.new_value_id()
            self.values[value_id] = value
            shape, dtype = self.describe(value) if hasattr(value, "dtype") else describe_missing(index)
            index_attribute = [("index", str(index))]
            session.op(
                "region_output", [(token, 0)], [(value_id, value, shape, dtype)], False, index_attribute
            )
            self.records[value_id] = ReplayRecord(call, "region_output", template, {}, index, seam=True)
            pairs.append((value, value_id))
        return pairs

    # ---- compiled programs -------------------------------------------------------------------

    def run_program(self, program: Program, consts: Sequence[Pair], args: Sequence[Pair]) -> List[Pair]:
        """Runs ``program`` on ``consts`` and ``args``, recording every op; returns its outputs."""
        frame: List[Any] = [None] * program.size
        for slot, pair in program.literals:
            frame[slot] = pair
        for slot, pair in zip(program.const_slots, consts):
            frame[slot] = pair
        for slot, pair in zip(program.in_slots, args):
            frame[slot] = pair
        fast = self.fast
        for instruction in program.code:
            kind = instruction[0]
            if kind == OP:
                _, step, in_slots, out_slots = instruction
                ins = [frame[slot] for slot in in_slots]
                values = step.run([value for value, _ in ins], fast)
                if step.described is not None:
                    self.step(step, ins, values, frame, out_slots)
                    continue
                outs = self.op(step.name, ins, values, step.attributes, step.replay)
            elif kind == CONSTANT:
                frame[instruction[2]] = self.constant(instruction[1])
                continue
            else:
                _, item, in_slots, out_slots = instruction
                outs = self.nested(item, [frame[slot] for slot in in_slots])
            for slot, pair in zip(out_slots, outs):
                if slot is not None:
                    frame[slot] = pair
        return [frame[slot] for slot in program.out_slots]


def rerun(trace: Any, taps: Dict[int, Any], replace: Optional[Tuple[int, Any]] = None) -> List[Any]:
    """The imported program's output values, re-evaluated op by op from its replay records (so a
    framework's autodiff can differentiate through them), with ``taps[value id]`` added to each
    tapped value or one value replaced (``replace``: ``(value id, value)``). Opaque ops are
    skipped; a region's projections share one run of the region."""
    runtime = trace._runtime
    records, recorded, params = runtime.records, runtime.values, runtime.params
    values: Dict[int, Any] = {}
    region_results: Dict[int, Any] = {}
    outputs = []

    def lookup(reference: ValueRef) -> Any:
        return params[reference.value] if reference.value in params else values[reference.value]

    for op in trace.ops:
        value_id = op._info["value"]
        if op.kind == "output":
            outputs.append(values[op.parents[0]._info["value"]])
            continue
        record: Optional[ReplayRecord] = records.get(value_id)
        if record is None:
            value = recorded[value_id]
        elif record.opaque or record.call is None:
            continue
        else:
            key = id(record.call)
            if key not in region_results or not record.seam:
                region_results[key] = record.call(*fill(record.args, lookup), **fill(record.kwargs, lookup))
            result = region_results[key]
            value = result if record.output_index is None else result[record.output_index]
        if replace is not None and replace[0] == value_id:
            value = replace[1]
        elif value_id in taps:
            value = value + taps[value_id]
        values[value_id] = value
    return outputs
