"""Replay validation, one driver for every backend.

1. The model runs again with nothing installed (the adapter's ``reference_output``); each
   output must equal the recorded value (or the ``outputs`` the caller passes).
2. Every op is re-run (the adapter's ``run_op``) from its parents' recorded values and must
   reproduce its own value, within the dtype's rounding tolerance (:data:`TOLERANCE`).
3. Each perturbable parent (parameters included) is perturbed, gently then strongly, then all
   of them together; a perturbation that moves the op's result beyond rounding, relative to
   the result's own scale, shows the recorded edges matter (``replay_matched``). Functions
   whose output does not depend on input values (:mod:`.value_independence`) are checked by
   replay alone (``value_independent_replay``). An op that replays exactly but that no
   perturbation moves is unverified (``perturbation_inconclusive``), as is one with tensor
   arguments of which none can be perturbed (``no_perturbable_parent``): the status folds to
   unverified, never to a silent pass and never to a false failure. Integer operands beside a
   floating one (shapes, sizes, indices: :func:`control_operands`) are never perturbed: a
   kernel given a wrong one may end the process instead of raising.
4. Self-consistency first: an op that is, or reads, a value whose producer the capture never
   recorded (``ReplayRuntime.unresolved``, or a reference naming no value of the trace) is
   ``not_replayable`` with ``unresolved_producer``; an opaque record reports its
   ``region_reason``. The status counts these apart (``pure_unverified``, ``effect_regions``).

Records, values and the stop frontier are keyed by the adapter's own value ids; the op a value
belongs to comes from the trace (``op._info["value"]``). The core folds the decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from ..errors import ArgumentError, PayloadModifiedError
from ..validation import fold
from .value_independence import value_independent

#: Relative and absolute tolerance by dtype: a framework may pick another kernel for the same op
#: (a fused kernel may run only when no interception mode is active), which changes rounding.
TOLERANCE: Mapping[str, float] = {
    "float8_e4m3": 1.25e-1,
    "float8_e5m2": 2.5e-1,
    "float16": 1e-2,
    "bfloat16": 2e-2,
    "float32": 1e-4,
    "float64": 1e-9,
    "complex64": 1e-4,
    "complex128": 1e-9,
}

#: Perturbation attempts per parent before it is called inert (a comparison on one element can
#: survive one perturbation by chance).
ATTEMPTS_PER_PARENT = 3


class ValueRef:
    """A tensor argument in a replay template: the recorded value with this id."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"ValueRef({self.value})"


class ParamRef(ValueRef):
    """A parameter argument in a replay template: the parameter declared with this id."""

    __slots__ = ()


#: The keyword template of a call that passed no keyword arguments (most calls): one read-only
#: mapping shared by their records instead of an empty dict each (on a long trace that dict is a
#: sixth of the records' memory).
NO_KEYWORDS: Mapping[str, Any] = MappingProxyType({})


class ReplayRecord:
    """How to re-run the op that produced one value: ``call(*args, **kwargs)`` with the
    templates' references filled in; ``output_index`` picks this value among several results.
    An ``opaque`` record stands for a region no per-op replay can check; a ``seam`` record is one
    output of such a region, re-run with the whole region: its value is checked, but which of the
    region's inputs it depends on is hidden inside the region, so it is not perturbed (the
    region's ``opaque`` boundary already keeps the status from passing).

    One is made for every value a capture records: a slotted class (no per-instance dict) keeps
    that to one small allocation."""

    __slots__ = ("call", "func_name", "args", "kwargs", "output_index", "opaque", "seam", "region_reason")

    def __init__(
        self,
        call: Optional[Callable[..., Any]],
        func_name: str,
        args: tuple = (),
        kwargs: Optional[Mapping[str, Any]] = None,
        output_index: Optional[int] = None,
        opaque: bool = False,
        seam: bool = False,
        region_reason: str = "opaque_region",
    ) -> None:
        self.call = call
        self.func_name = func_name
        self.args = args
        self.kwargs: Mapping[str, Any] = NO_KEYWORDS if kwargs is None else kwargs
        self.output_index = output_index
        self.opaque = opaque
        self.seam = seam
        #: The validation reason an ``opaque`` record reports (``control_flow_region`` for a
        #: While/If, ``predict_loop_region`` for a ``Model.predict`` loop).
        self.region_reason = region_reason

    def __repr__(self) -> str:
        return f"ReplayRecord({self.func_name!r}, output_index={self.output_index!r}, opaque={self.opaque!r})"


@dataclass
class ReplayRuntime:
    """Runtime-only replay data of a live trace (never saved to a file). ``values`` holds the
    values replay reads; when None it reads the trace's saved payloads."""

    records: Dict[int, ReplayRecord]
    reference: Callable[[], List[Any]]
    params: Dict[int, Any] = field(default_factory=dict)
    #: Parameter id → its neutral dtype name (what perturbation produces for it).
    param_dtypes: Dict[int, str] = field(default_factory=dict)
    values: Optional[Dict[int, Any]] = None
    #: Edited value id → (the actions applied, the value before the first edit): what replay of
    #: an edited op re-applies (see ``replay_edits``).
    edits: Dict[int, Tuple[Tuple[Any, ...], Any]] = field(default_factory=dict)
    #: The capture request the trace came from (what ``trace.fork().do(...)`` runs again).
    request: Any = None
    #: Value ids whose producer the capture never recorded (a value that left the framework
    #: and came back, an op the capture could not see): each such value, and every op reading
    #: one, is ``not_replayable`` with reason ``unresolved_producer``.
    unresolved: Set[int] = field(default_factory=set)
    #: The shape of what the model returned (:func:`output_structure`), against which outputs
    #: handed to ``validate_forward_pass`` are matched; None where the capture has none to give
    #: (an early stop, a traced program), and then only their count is.
    output_structure: Any = None


def replay_coverage(
    prefix: str, records: Dict[int, ReplayRecord], opaque: int, unresolved: Optional[Set[int]] = None
) -> Dict[str, str]:
    """What replay can check of a capture, as provenance facts named with the backend's
    ``prefix``: ``<prefix>_replayable_ops`` (recorded values replay can re-run), and, where
    there are any, ``<prefix>_opaque_ops`` (ops recorded without a replay call) and
    ``<prefix>_unresolved_producers`` (values whose producer the capture never saw)."""
    facts = {f"{prefix}_replayable_ops": str(sum(1 for record in records.values() if not record.opaque))}
    if opaque:
        facts[f"{prefix}_opaque_ops"] = str(opaque)
    if unresolved:
        facts[f"{prefix}_unresolved_producers"] = str(len(unresolved))
    return facts


def argument_template(
    args: tuple,
    kwargs: dict,
    array_type: Any,
    reference: Callable[[Any], Tuple[int, ValueRef]],
) -> Tuple[List[Tuple[int, int]], tuple, Mapping[str, Any]]:
    """The parents and replay templates of one call. Each argument of ``array_type`` (at the top
    level, or inside a list or tuple argument) becomes ``reference(array)``'s
    ``(value id, reference)``, positional or keyword; keyword arguments take the positions after
    the positional ones. It runs once per captured op, so it stays one flat pass without helper
    calls for the common arguments (arrays and plain constants)."""
    parents: List[Tuple[int, int]] = []
    template = []
    position = 0
    for argument in args:
        if isinstance(argument, array_type):
            value_id, ref = reference(argument)
            parents.append((value_id, position))
            template.append(ref)
        elif isinstance(argument, (tuple, list)):
            template.append(_sequence_template(argument, position, parents, array_type, reference))
        elif isinstance(argument, dict):
            template.append(snapshot(argument))
        else:
            template.append(argument)
        position += 1
    if not kwargs:
        return parents, tuple(template), NO_KEYWORDS
    keywords: dict = {}
    for key, argument in kwargs.items():
        if isinstance(argument, array_type):
            value_id, ref = reference(argument)
            parents.append((value_id, position))
            keywords[key] = ref
        elif isinstance(argument, (tuple, list)):
            keywords[key] = _sequence_template(argument, position, parents, array_type, reference)
        elif isinstance(argument, dict):
            keywords[key] = snapshot(argument)
        else:
            keywords[key] = argument
        position += 1
    return parents, tuple(template), keywords


def _sequence_template(
    argument: Any,
    position: int,
    parents: List[Tuple[int, int]],
    array_type: Any,
    reference: Callable[[Any], Tuple[int, ValueRef]],
) -> Any:
    """A list or tuple argument: arrays inside it (a concatenation's list) are references too, so the
    template never holds a value the selection released; they share the argument's position.
    Everything else in it is a :func:`snapshot`."""
    if not any(isinstance(item, array_type) for item in argument):
        return snapshot(argument)
    items = []
    for item in argument:
        if isinstance(item, array_type):
            value_id, ref = reference(item)
            parents.append((value_id, position))
            items.append(ref)
        else:
            items.append(snapshot(item))
    return tuple(items) if isinstance(argument, tuple) else items


def snapshot(argument: Any) -> Any:
    """A non-array argument as it is when the call runs: lists and dicts (and tuples holding
    them) are copied, so a caller that edits its ``shape`` list after the call (an
    ``nn.Upsample`` does) cannot change what replay passes. Immutable values, and arrays, are
    kept as they are. Every recorder templates its calls through this (the native
    recorder's ``snapshot`` in ``held_op.rs`` is its twin)."""
    if isinstance(argument, list):
        return [snapshot(item) for item in argument]
    if isinstance(argument, tuple):
        if any(isinstance(item, (list, tuple, dict)) for item in argument):
            return tuple(snapshot(item) for item in argument)
        return argument
    if isinstance(argument, dict):
        return {key: snapshot(item) for key, item in argument.items()}
    return argument


def template_leaves(template: Any) -> Iterator[Any]:
    """Every leaf of a template (nested tuples, lists and dicts): references and constants."""
    if isinstance(template, (tuple, list)):
        for item in template:
            yield from template_leaves(item)
    elif isinstance(template, dict):
        for item in template.values():
            yield from template_leaves(item)
    else:
        yield template


def references(template: Any) -> List[ValueRef]:
    """Every reference inside a template."""
    return [leaf for leaf in template_leaves(template) if isinstance(leaf, ValueRef)]


def fill(template: Any, lookup: Callable[[ValueRef], Any]) -> Any:
    """The template with every reference replaced by ``lookup(reference)``."""
    if isinstance(template, ValueRef):
        return lookup(template)
    if isinstance(template, tuple):
        return tuple(fill(item, lookup) for item in template)
    if isinstance(template, list):
        return [fill(item, lookup) for item in template]
    if isinstance(template, dict):
        return {key: fill(item, lookup) for key, item in template.items()}
    return template


def differ(adapter: Any, left: Any, right: Any, dtype: str) -> Optional[bool]:
    """Whether two framework values differ by more than rounding (None when the adapter cannot
    give host views of both). Integers and booleans must be equal; floating values may differ
    by the dtype's tolerance relative to each element and to ``right``'s own scale (its
    largest magnitude): an output of magnitude 1e-6 that moves by 1e-7 differs, where a fixed
    absolute tolerance would call it unchanged."""
    import numpy  # lazy: importing torchlens imports no numpy

    try:
        a, b = adapter.to_numpy(left), adapter.to_numpy(right)
    except Exception:
        return None
    if a.shape != b.shape or a.dtype != b.dtype:
        return True
    tolerance = TOLERANCE.get(dtype)
    if tolerance is None:
        return not bool(numpy.array_equal(a, b))
    if numpy.array_equal(a, b, equal_nan=True):
        return False
    left_dtype = a.dtype
    wide = numpy.complex128 if a.dtype.kind == "c" else numpy.float64
    a, b = a.astype(wide), b.astype(wide)
    if bool((numpy.isnan(a) != numpy.isnan(b)).any()):
        return True
    finite = numpy.isfinite(a) & numpy.isfinite(b)
    if bool((a[~finite] != b[~finite]).any()):
        return True
    if not finite.any():
        return False
    # The scale never drops below the dtype's epsilon: an all-zero result tolerates rounding too.
    scale = max(float(numpy.abs(b[finite]).max()), float(numpy.finfo(_real_dtype(left_dtype)).eps))
    difference = numpy.abs(a[finite] - b[finite])
    return bool((difference > tolerance * (numpy.abs(b[finite]) + scale)).any())


def _real_dtype(dtype: Any) -> Any:
    """The real floating dtype of a host array's dtype (complex64 → float32; bfloat16 and
    float8 host views are float32 already)."""
    import numpy  # lazy: importing torchlens imports no numpy

    if dtype.kind == "c":
        return numpy.float32 if dtype.itemsize == 8 else numpy.float64
    return dtype if dtype.kind == "f" else numpy.float64


def values_match(adapter: Any, left: Any, right: Any, dtype: str) -> bool:
    """Whether two framework values are equal within rounding (see :func:`differ`)."""
    return differ(adapter, left, right, dtype) is False


def moved(adapter: Any, changed: Any, expected: Any, dtype: str) -> bool:
    """Whether a perturbed replay's result moved away from the recorded one (see :func:`differ`)."""
    return differ(adapter, changed, expected, dtype) is True


class _Replayer:
    """One validation run over one trace."""

    def __init__(self, adapter: Any, trace: Any, runtime: ReplayRuntime) -> None:
        import numpy  # lazy: importing torchlens imports no numpy

        self.adapter = adapter
        self.trace = trace
        self.runtime = runtime
        self.rng = numpy.random.default_rng(0)
        self.values: Dict[int, Any] = {}
        self.dtypes: Dict[int, str] = {}

    # ---- values ------------------------------------------------------------------------------

    def load_values(self, decisions: List[Tuple[int, str, str]]) -> None:
        source = self.runtime.values
        for op in self.trace.ops:
            value_id = op._info.get("value")
            if value_id is None:
                continue
            self.dtypes[value_id] = op.dtype
            if source is not None:
                if value_id in source:
                    self.values[value_id] = source[value_id]
                continue
            try:
                value = self.trace._payload(value_id)
            except PayloadModifiedError:
                decisions.append((op.index, "failed", "payload_modified_after_capture"))
                continue
            if value is not None:
                self.values[value_id] = value

    def lookup(self, override: Optional[Tuple[ValueRef, Any]] = None) -> Callable[[ValueRef], Any]:
        params, values, fresh = self.runtime.params, self.values, self.adapter.replay_argument

        def find(reference: ValueRef) -> Any:
            if override is not None and reference is override[0]:
                return override[1]
            if isinstance(reference, ParamRef):
                return params[reference.value]
            return fresh(values[reference.value])

        return find

    def available(self, reference: ValueRef) -> bool:
        store = self.runtime.params if isinstance(reference, ParamRef) else self.values
        return reference.value in store

    def unresolved(self, value_id: int, arguments: List[ValueRef]) -> bool:
        """Callback self-consistency: the value, or an argument of its op, has no recorded
        producer (the capture marked it, or the reference names no value of the trace)."""
        unresolved = self.runtime.unresolved
        if value_id in unresolved:
            return True
        for reference in arguments:
            if reference.value in unresolved:
                return True
            if not isinstance(reference, ParamRef) and reference.value not in self.dtypes:
                return True
        return False

    def run(self, record: ReplayRecord, override: Optional[Tuple[ValueRef, Any]] = None) -> Any:
        find = self.lookup(override)
        return self.adapter.run_op(record, fill(record.args, find), fill(record.kwargs, find))

    def run_with(self, record: ReplayRecord, values: Dict[Tuple[type, int], Any]) -> Any:
        """Re-runs the op with every argument of a parent in ``values`` (keyed by reference type
        and value id: a parent passed twice moves in both places) replaced."""
        plain = self.lookup()

        def find(reference: ValueRef) -> Any:
            found = values.get((type(reference), reference.value))
            return found if found is not None else plain(reference)

        return self.adapter.run_op(record, fill(record.args, find), fill(record.kwargs, find))

    def joint_perturbations(
        self, distinct: List[ValueRef], hosts: Dict[int, Any], originals: Dict[int, Any]
    ) -> Iterator[Dict[Tuple[type, int], Any]]:
        """Every perturbable parent moved at once, by a gentle then a strong random move (only
        floating parents; two attempts each)."""
        import numpy  # lazy: importing torchlens imports no numpy

        movable = [
            ref
            for ref in distinct
            if hosts[id(ref)] is not None and hosts[id(ref)].size and self.dtype_of(ref) in TOLERANCE
        ]
        if len(movable) < 2:
            return
        for strength in (1.0, 1e3):
            for _ in range(2):
                values = {}
                for ref in movable:
                    array = hosts[id(ref)]
                    wide = numpy.where(numpy.isfinite(array), array, 0).astype(numpy.float64)
                    noise = self.rng.standard_normal(array.shape) * strength
                    candidate = wide + noise * (numpy.abs(wide) + 1)
                    values[(type(ref), ref.value)] = self.framework_value(
                        candidate, self.dtype_of(ref), originals[id(ref)]
                    )
                yield values

    # ---- comparison and perturbation ------------------------------------------------------------

    def same(self, left: Any, right: Any, dtype: str) -> bool:
        return values_match(self.adapter, left, right, dtype)

    def host(self, value: Any) -> Any:
        """The host view of a value, or None when the adapter cannot give one."""
        try:
            return self.adapter.to_numpy(value)
        except Exception:
            return None

    def perturbations(self, array: Any, dtype: str, others: List[Any]) -> Iterator[Any]:
        """Different values of the same shape for one argument, gentlest first. Each is sound
        evidence of a dependence if it changes the op's result; together they can change
        value-dependent functions too (comparisons, rounding, ``argmax``, ``isfinite``, bit
        shifts), which a small random move often cannot:

        1. small moves: floats by a gaussian scaled to their magnitude (non-finite entries become
           finite), integers by 1 to 3, booleans flipped (three draws);
        2. another argument's values (a comparison's two sides made equal, or one apart);
        3. a strong move (floats a thousand times larger), then extremes: NaN and infinity for
           floats, random values over the whole range for
           integers, all true and all false for booleans;
        4. reversals: negation and every axis reversed.
        """
        import numpy  # lazy: importing torchlens imports no numpy

        floating = dtype in TOLERANCE
        finite = array
        if floating:
            wide = array.astype(numpy.complex128 if array.dtype.kind == "c" else numpy.float64)
            finite = numpy.where(numpy.isfinite(wide), wide, 0.0)
            for _ in range(ATTEMPTS_PER_PARENT):
                noise = self.rng.standard_normal(array.shape)
                yield finite + noise * (numpy.abs(finite) + 1)
        elif dtype == "bool":
            yield ~array.astype(bool)
        else:
            for _ in range(ATTEMPTS_PER_PARENT):
                yield array + self.rng.integers(1, 4, size=array.shape).astype(array.dtype)
        for other in others:
            try:
                aligned = numpy.broadcast_to(other, array.shape).astype(array.dtype)
            except (ValueError, TypeError):
                continue
            yield aligned
            if dtype != "bool":
                yield aligned + numpy.ones((), dtype=array.dtype)
        if floating:
            # A stronger move before the extremes: an op that scales its input down by 1e-6
            # (ConvNeXt's layer scale) still moves visibly.
            yield finite * 1e3 + self.rng.standard_normal(array.shape) * (numpy.abs(finite) + 1) * 1e3
            yield numpy.full(array.shape, numpy.nan)
            yield numpy.full(array.shape, numpy.inf)
        elif dtype == "bool":
            yield numpy.ones(array.shape, dtype=bool)
            yield numpy.zeros(array.shape, dtype=bool)
        elif array.dtype.kind in "iu":
            limits = numpy.iinfo(array.dtype)
            yield self.rng.integers(
                limits.min, limits.max, size=array.shape, dtype=array.dtype, endpoint=True
            )
        if dtype != "bool" and array.dtype.kind != "u":
            yield -array
        yield numpy.ascontiguousarray(array[(slice(None, None, -1),) * array.ndim])

    def framework_value(self, array: Any, dtype: str, like: Any) -> Any:
        import numpy  # lazy: importing torchlens imports no numpy

        # numpy.array keeps a 0-d array 0-d (ascontiguousarray would make it 1-d).
        return self.adapter.from_numpy(numpy.array(array, order="C"), dtype, like=like)

    def dtype_of(self, reference: ValueRef) -> str:
        if isinstance(reference, ParamRef):
            return self.runtime.param_dtypes.get(reference.value, "")
        return self.dtypes.get(reference.value, "")

    # ---- one op ----------------------------------------------------------------------------

    def decide(self, op: Any) -> Tuple[str, str]:
        value_id = op._info.get("value")
        record = self.runtime.records.get(value_id) if value_id is not None else None
        if value_id is None or record is None:
            return "not_replayable", "payload_not_saved"
        arguments = references((record.args, record.kwargs))
        if self.unresolved(value_id, arguments):
            return "not_replayable", "unresolved_producer"
        if record.opaque:
            return "not_replayable", record.region_reason
        if value_id not in self.values or not all(self.available(ref) for ref in arguments):
            return "not_replayable", "payload_not_saved"
        expected = self.values[value_id]
        try:
            replayed = self.run(record)
        except Exception:
            return "failed", "replay_failed"
        if not self.same(replayed, expected, op.dtype):
            return "failed", "replay_mismatch"
        if record.seam:
            return "passed", "replay_matched"
        if not arguments or value_independent(record.func_name) or _is_empty(self.adapter, expected):
            # No argument whose value could matter (or no element to change): the replay itself
            # is the whole check.
            return "passed", "value_independent_replay"
        ran_any = False
        distinct = list({(type(ref), ref.value): ref for ref in arguments}.values())
        originals = {id(ref): self.lookup()(ref) for ref in distinct}
        hosts = {id(ref): self.host(originals[id(ref)]) for ref in distinct}
        literals = _numeric_literals((record.args, record.kwargs))
        control = control_operands(distinct, self.dtype_of)
        for reference in distinct:
            array = hosts[id(reference)]
            if array is None or array.size == 0 or array.dtype.kind in "SUO":
                continue  # nothing to change (strings and objects have no numeric perturbation)
            if id(reference) in control:
                continue  # a shape, size or index: a kernel may abort the process on a wrong one
            dtype = self.dtype_of(reference)
            others = [hosts[id(other)] for other in distinct if other is not reference]
            others = [other for other in others if other is not None] + literals
            for candidate in self.perturbations(array, dtype, others):
                try:
                    value = self.framework_value(candidate, dtype, originals[id(reference)])
                    changed = self.run(record, (reference, value))
                except Exception:
                    continue
                ran_any = True
                if moved(self.adapter, changed, expected, op.dtype):
                    return "passed", "replay_matched"
        # No parent alone moved it (a zero weight hides its input, and the input its weight):
        # move every parent at once.
        for joint in self.joint_perturbations(distinct, hosts, originals):
            try:
                changed = self.run_with(record, joint)
            except Exception:
                continue
            ran_any = True
            if moved(self.adapter, changed, expected, op.dtype):
                return "passed", "replay_matched"
        if not ran_any:
            return "not_replayable", "no_perturbable_parent"
        return "not_replayable", "perturbation_inconclusive"


def control_operands(distinct: List[ValueRef], dtype_of: Callable[[ValueRef], str]) -> Set[int]:
    """The ``id``s of the integer operands of a call that also reads a floating operand: its
    shapes, sizes, indices, axes and counts (``Conv2DBackpropInput``'s ``input_sizes``, a
    gather's indices, a reshape's shape). Replay never perturbs them: a perturbed control value
    is not evidence of a dependence, and some kernels end the whole process on one instead of
    raising (a oneDNN convolution aborts on a negative dimension). The floating
    operands carry the perturbation check; an op whose operands are all integers (integer
    arithmetic) still has its integers perturbed."""
    dtypes = {id(reference): dtype_of(reference) for reference in distinct}
    if not any(dtype in TOLERANCE for dtype in dtypes.values()):
        return set()
    return {key for key, dtype in dtypes.items() if dtype.startswith(("int", "uint"))}


def _numeric_literals(template: Any) -> List[Any]:
    """The number and array constants written into a call (``x != 0``'s zero): a comparison's
    other side, which a perturbation may copy."""
    import numpy  # lazy: importing torchlens imports no numpy

    found = []
    for leaf in template_leaves(template):
        if isinstance(leaf, ValueRef) or isinstance(leaf, bool):
            continue
        if isinstance(leaf, (int, float)) or (hasattr(leaf, "__array__") and hasattr(leaf, "dtype")):
            try:
                found.append(numpy.asarray(leaf))
            except Exception:
                continue
    return found


def _is_empty(adapter: Any, value: Any) -> bool:
    try:
        return adapter.to_numpy(value).size == 0
    except Exception:
        return False


def validation_status(adapter: Any, trace: Any, outputs: Optional[List[Any]] = None) -> Any:
    """Replay-validates a live trace with ``adapter``'s hooks; returns the folded
    :class:`~torchlens.validation.ValidationStatus`."""
    labels = [op.label for op in trace.ops]
    runtime = trace._runtime
    if runtime is None:
        return fold([], labels, runtime_available=False)
    # Shape-only values (a meta device): nothing to replay, and nothing was wrong.
    # (Read past the payload guard: a value changed after the capture is replay's to report.)
    payloads = trace._payloads
    empty = [
        op.index
        for op in trace.ops
        if op._info["payload"] in payloads and not adapter.holds_data(payloads[op._info["payload"]])
    ]
    if empty:
        return fold([(op, "not_replayable", "values_not_materialized") for op in empty], labels)
    decisions: List[Tuple[int, str, str]] = []
    replayer = _Replayer(adapter, trace, runtime)
    replayer.load_values(decisions)
    failed = {op for op, _, _ in decisions}

    # 1. The model's own outputs: those the caller passed, else the model run with nothing
    # installed.
    rerun = outputs is None or (isinstance(outputs, (list, tuple)) and not outputs)
    expected = runtime.reference() if rerun else given_outputs(adapter, trace, outputs)
    for op, value in zip(trace.outputs, expected):
        parent = op.parents[0] if op.parents else None
        recorded = replayer.values.get(parent._info.get("value")) if parent is not None else None
        if recorded is None or not replayer.same(recorded, value, op.dtype):
            decisions.append((op.index, "failed", "output_mismatch"))
        else:
            decisions.append((op.index, "leaf", "replay_matched"))

    # Edits: what replay re-applies must be exactly what the trace records as fired.
    for op in _edit_declaration_mismatches(trace, runtime):
        decisions.append((op.index, "failed", "edit_declaration_mismatch"))
        failed.add(op.index)

    # 2 and 3. Every op from its parents' recorded values.
    for op in trace.ops:
        kind = op.kind
        if kind == "output" or op.index in failed:
            continue
        if kind == "input":
            decisions.append((op.index, "leaf", "input_leaf"))
        elif kind in ("constant", "buffer"):
            if op._info.get("value") in runtime.unresolved:
                decisions.append((op.index, "not_replayable", "unresolved_producer"))
            else:
                decisions.append((op.index, "leaf", "constant_producer_leaf"))
        else:
            outcome, reason = replayer.decide(op)
            decisions.append((op.index, outcome, reason))
    return fold(decisions, labels)


def output_structure(adapter: Any, output: Any) -> Any:
    """The shape of a returned structure as validation compares it: tuples, lists and dicts kept
    with their keys, each array (one of the adapter's ``output_leaves``) as ``"array"``, any other
    leaf by its type's name."""
    arrays = {id(leaf) for leaf in adapter.output_leaves(output)}

    def shape(value: Any) -> Any:
        if id(value) in arrays:
            return "array"
        if isinstance(value, (tuple, list)):
            return (type(value).__name__, tuple(shape(item) for item in value))
        if isinstance(value, dict):
            return ("dict", tuple((key, shape(item)) for key, item in value.items()))
        return type(value).__name__

    return shape(output)


def given_outputs(adapter: Any, trace: Any, outputs: Any) -> List[Any]:
    """The arrays of the outputs a caller handed to ``validate_forward_pass``: what the model
    returned, in the same structure (a lone value, a tuple, a dict, any nest) where the capture
    recorded it, or a flat list of its arrays (the reference's habit); either way as many arrays
    as the trace has outputs. Anything else is an :class:`~torchlens.errors.ArgumentError`
    (``validation_outputs_mismatch``), never a pass. (None or an empty list means: run the
    model again.)"""
    remedy = (
        "pass exactly what the model returned (trace.validate_forward_pass(model(x))), or nothing, "
        "to run the model again"
    )
    try:
        leaves = adapter.output_leaves(outputs)
    except Exception as error:  # a leaf the framework cannot read as an array ("junk", 5)
        raise ArgumentError(
            f"validate_forward_pass was given outputs the {adapter.name} backend cannot read: {error}",
            "validation_outputs_mismatch",
            remedy,
        ) from error
    expected = trace._runtime.output_structure
    given = output_structure(adapter, outputs) if expected is not None else None
    flat = (
        isinstance(outputs, (list, tuple))
        and len(outputs) == len(leaves)
        and all(item is leaf for item, leaf in zip(outputs, leaves))
    )
    if len(leaves) != len(trace.outputs) or not (flat or given == expected):
        returned = f" as {_describe(expected)}" if expected is not None else ""
        passed = f" as {_describe(given)}" if given is not None else ""
        raise ArgumentError(
            f"validate_forward_pass was given {len(leaves)} array(s){passed}; the model returned "
            f"{len(trace.outputs)}{returned}",
            "validation_outputs_mismatch",
            remedy,
        )
    return leaves


def _describe(structure: Any) -> str:
    """An output structure as a message shows it: ``(array, array)``, ``{'logits': array}``."""
    if isinstance(structure, tuple) and len(structure) == 2 and structure[0] == "dict":
        return "{" + ", ".join(f"{key!r}: {_describe(item)}" for key, item in structure[1]) + "}"
    if isinstance(structure, tuple) and len(structure) == 2:
        opening, closing = ("[", "]") if structure[0] == "list" else ("(", ")")
        return opening + ", ".join(_describe(item) for item in structure[1]) + closing
    return str(structure)


def _edit_declaration_mismatches(trace: Any, runtime: ReplayRuntime) -> List[Any]:
    """Ops whose runtime edit declaration (what replay re-applies) is missing, extra, or names
    other actions than the trace's edit records."""
    declared = runtime.edits
    mismatched = []
    for op in trace.ops:
        if op.kind == "output":
            continue
        declaration = declared.get(op._info.get("value"))
        recorded = [record.helper_name for record in op.fire_records]
        named = [action.describe() for action in declaration[0]] if declaration is not None else []
        if recorded != named:
            mismatched.append(op)
    return mismatched


def replay_edits(
    runtime: ReplayRuntime,
    fired: Dict[int, Tuple[Tuple[Any, ...], Any]],
    adapter: Any,
    apply: Callable[[Any, Any, Any], Any],
    output_of: Callable[[Any, Optional[int]], Any],
) -> None:
    """Makes replay of every edited op (``fired``: value id → (the actions applied, the value
    before the first edit)) re-run the original call, check the result against the recorded
    pre-edit value and re-apply the declared actions through ``apply(adapter, action, value)``.
    A value no declaration covers replays as the plain call, so a replacement presented as what
    the model computed fails validation. ``output_of(result, output_index)`` picks the op's
    output from the call's result."""
    runtime.edits = fired
    for value_id in fired:
        record = runtime.records.get(value_id)
        if record is None or record.call is None:
            continue
        record.call = edited_call(
            runtime, value_id, record.call, record.output_index, adapter, apply, output_of
        )
        record.output_index = None


def edited_call(
    runtime: ReplayRuntime,
    value_id: int,
    original: Callable[..., Any],
    output_index: Optional[int],
    adapter: Any,
    apply: Callable[[Any, Any, Any], Any],
    output_of: Callable[[Any, Optional[int]], Any],
) -> Callable[..., Any]:
    """The replay call of one edited op (what ``replay_edits`` installs)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        produced = output_of(original(*args, **kwargs), output_index)
        declared = runtime.edits.get(value_id)
        if declared is None:
            return produced
        actions, pre_edit = declared
        if not values_match(adapter, produced, pre_edit, adapter.neutral_dtype(pre_edit)):
            return produced
        value = pre_edit
        for action in actions:
            value = apply(adapter, action, value)
        return value

    return call
