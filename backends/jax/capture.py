"""One capture of a JAX function: evaluate its jaxpr (traced once per call signature, see
:mod:`.jaxpr_cache`) equation by equation with real values, each plain equation through the
executable its eager bind would run (:mod:`.dispatch`), reporting each equation to the core as
one raw event. Each jaxpr is walked through its compiled :mod:`.program`. Nested pure ``jit``
calls and ``custom_jvp`` calls are inlined; ``scan``, ``cond`` and capped ``while`` are
unrolled; over-cap loops and ``custom_vjp`` calls become regions (one boundary node, one
projection node per output)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.extend import core as jcore

from torchlens.adapter_kit import CaptureSession
from torchlens.adapter_kit.replay import ParamRef, ReplayRecord, ValueRef

from .compat import DropVar, bind_params
from .dispatch import Bind, Step, direct_dispatch_allowed
from .dtypes import describe, describe_aval, keyed
from .program import CONSTANT, OP, Program, compile_program
from .refusals import CALL_PRIMITIVES, REGION_PRIMITIVES

Pair = Tuple[Any, Optional[int]]  # (value, value id or None for a literal)

_Literal = jcore.Literal
_Array = jax.Array
_DropVar = DropVar


# Slicing and stacking move data without arithmetic, so a jitted version returns the very bits
# the eager one does, at one dispatch instead of the eager ``jax.lax``/``jax.numpy`` wrappers.
_index_in_dim = jax.jit(
    lambda value, index: jax.lax.index_in_dim(value, index, keepdims=False), static_argnums=1
)
_stack = jax.jit(lambda *values: jax.numpy.stack(values))


class IndexInDim:
    """Slice ``index`` of the leading axis (what ``scan`` hands its body each iteration)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, value: Any) -> list:
        return [_index_in_dim(value, self.index)]


def as_array(value: Any) -> Any:
    """A value as a ``jax.Array`` (``jnp.asarray`` hands an array back unchanged; skipping it
    for one saves its dispatch)."""
    return value if isinstance(value, _Array) else jax.numpy.asarray(value)


def copy_value(value: Any) -> list:
    """A copy of a value (an output that is a parameter leaf reads it through this op)."""
    return [jax.numpy.array(value, copy=True)]


def stack(*values: Any) -> list:
    """The per-iteration outputs of an unrolled ``scan``, stacked on a new leading axis."""
    return [_stack(*values)]


#: Rendered equation parameters, by (name, value): the same parameters recur across equations
#: and captures. Bounded; unhashable values are rendered each time.
_RENDERED: Dict[Tuple[str, Any], Optional[str]] = {}


def _rendered(key: str, value: Any) -> Optional[str]:
    try:
        return _RENDERED[(key, value)]
    except KeyError:
        text = _render(value)
        if len(_RENDERED) < 65536:
            _RENDERED[(key, value)] = text
        return text
    except TypeError:
        return _render(value)


def _render(value: Any) -> Optional[str]:
    if value is None or isinstance(value, (bool, int, float, str, np.dtype, np.generic)):
        return str(value)
    if isinstance(value, tuple) and len(value) <= 16:
        parts = [_render(item) for item in value]
        if all(part is not None for part in parts):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return None


class Capture:
    """State of one capture around the shared session: the runtime-only value of every op (replay
    and derived gradients read these, whatever ``save=`` keeps public), parameter leaves, and how
    replay re-runs each value's equation. Every key is a value id this adapter chose."""

    def __init__(self, session: CaptureSession, mode: str, cap: int, prepared: Any = None) -> None:
        self.session = session
        self.mode = mode
        self.cap = cap
        #: Prepared plain equations (by ``id(eqn)``) and compiled programs (by ``id(jaxpr)``):
        #: shared by every capture of one cached jaxpr (``prepared`` is its cache entry).
        self.steps: Dict[int, Step] = {} if prepared is None else prepared.steps
        self.programs: Dict[int, Program] = {} if prepared is None else prepared.programs
        #: Whether plain equations call their executables directly (see :mod:`.dispatch`).
        self.direct = direct_dispatch_allowed()
        #: Value id → its value (runtime-only).
        self.values: Dict[int, Any] = {}
        #: Value id → parameter leaf, and its neutral dtype.
        self.param_values: Dict[int, Any] = {}
        self.param_dtypes: Dict[int, str] = {}
        #: Value ids of typed PRNG keys → the key implementation's name.
        self.key_impls: Dict[int, str] = {}
        #: Value id → how replay re-runs the equation that produced it.
        self.records: Dict[int, ReplayRecord] = {}
        #: Module attribution: called before each top-level equation (``(eqn, index, env)``)
        #: and once after the last (``(env)``).
        self.scope_hook: Optional[Callable[[Any, int, dict], None]] = None
        self.scope_close: Optional[Callable[[dict], None]] = None

    # ---- values ------------------------------------------------------------------------------

    def _value(self, value: Any) -> Tuple[int, list, str]:
        """A fresh id for ``value``, remembered as its runtime value; its shape and dtype."""
        value_id = self.session.new_value_id()
        self.values[value_id] = value
        if keyed(value.dtype):
            self.key_impls[value_id] = str(jax.random.key_impl(value))
        shape, dtype = describe(value)
        return value_id, shape, dtype

    def _placeholder(self, value: Any, value_id: Optional[int]) -> Any:
        if value_id is None:
            return value
        if value_id in self.param_values:
            return ParamRef(value_id)
        return ValueRef(value_id)

    # ---- declarations --------------------------------------------------------------------

    def param(self, address: str, module: int, value: Any, trainable: bool = True) -> Pair:
        value_id = self.session.new_value_id()
        shape, dtype = describe(value)
        self.param_values[value_id] = value
        self.param_dtypes[value_id] = dtype
        self.session.param(value_id, address, module, shape, dtype, trainable)
        return value, value_id

    def input(self, name: str, value: Any) -> Pair:
        value_id, shape, dtype = self._value(value)
        self.session.input(name, value_id, value, shape, dtype)
        return value, value_id

    def constant(self, value: Any) -> Pair:
        """A value read from outside the traced call (a closure array)."""
        value = as_array(value)
        value_id, shape, dtype = self._value(value)
        self.session.constant(value_id, value, shape, dtype)
        return value, value_id

    def output(self, name: str, pair: Pair) -> None:
        value, value_id = pair
        if value_id is None:
            value, value_id = self.constant(value)
        elif value_id in self.param_values:
            # The function returns a parameter leaf itself; the core's outputs are values the
            # trace computed, so the output reads it through one recorded copy.
            value, value_id = self.emit(
                "copy", [pair], copy_value(value), [("reason", "output_is_parameter")], copy_value
            )[0]
        self.session.output(name, value_id)

    # ---- ops ---------------------------------------------------------------------------------

    def emit(self, name: str, ins: Sequence[Pair], values: list, attributes: list, replay: Any) -> List[Pair]:
        parents = [(value_id, position) for position, (_, value_id) in enumerate(ins) if value_id is not None]
        template = tuple(self._placeholder(value, value_id) for value, value_id in ins)
        outputs = []
        pairs = []
        for index, value in enumerate(values):
            if not isinstance(value, _Array):
                # A primitive applied to a literal may hand the literal back (stop_gradient).
                value = jax.numpy.asarray(value)
            value_id, shape, dtype = self._value(value)
            outputs.append((value_id, value, shape, dtype))
            self.records[value_id] = ReplayRecord(replay, name, template, {}, index)
            pairs.append((value, value_id))
            if value_id in self.key_impls and not any(key == "jax_key_impl" for key, _ in attributes):
                # A typed key is recorded as its key data; say which implementation it is.
                attributes = list(attributes) + [("jax_key_impl", self.key_impls[value_id])]
        self.session.op(name, parents, outputs, False, attributes, None)
        return pairs

    def _emit_step(
        self, step: Step, ins: Sequence[Pair], values: list, frame: List[Any], out_slots: List[Optional[int]]
    ) -> None:
        """``emit`` for a prepared equation without typed keys among its outputs (the hot path
        of every capture): shapes and dtypes come from the jaxpr's types; each output's pair
        goes straight to its slot of ``frame``."""
        session = self.session
        param_values = self.param_values
        parents = []
        template = []
        for position, (value, value_id) in enumerate(ins):
            if value_id is None:
                template.append(value)
            else:
                parents.append((value_id, position))
                template.append(ParamRef(value_id) if value_id in param_values else ValueRef(value_id))
        arguments = tuple(template)
        outputs = []
        name, replay = step.name, step.replay
        values_by_id, records = self.values, self.records
        for index, (value, (shape, dtype), slot) in enumerate(zip(values, step.described, out_slots)):
            if not isinstance(value, _Array):
                value = jax.numpy.asarray(value)
            value_id = session.new_value_id()
            values_by_id[value_id] = value
            outputs.append((value_id, value, shape, dtype))
            records[value_id] = ReplayRecord(replay, name, arguments, {}, index)
            if slot is not None:
                frame[slot] = (value, value_id)
        session.op(name, parents, outputs, False, step.attributes, None)

    def _attributes(self, eqn: Any) -> list:
        """The equation's parameters that render as text, and its literal arguments."""
        attributes = []
        for key, value in eqn.params.items():
            text = _rendered(key, value)
            if text is not None:
                attributes.append((key, text))
        for position, atom in enumerate(eqn.invars):
            if isinstance(atom, _Literal):
                attributes.append((f"arg{position}", str(atom.val)))
        return attributes

    # ---- the interpreter -----------------------------------------------------------------

    def run(self, jaxpr: Any, consts: Sequence[Pair], args: Sequence[Pair], top: bool = False) -> List[Pair]:
        """Evaluates ``jaxpr`` (a ``Jaxpr``) on ``consts`` and ``args``, recording every
        equation; returns the outputs as pairs."""
        if top and self.scope_hook is not None:
            return self._walk(jaxpr, consts, args)
        program = self.programs.get(id(jaxpr))
        if program is None:
            program = self.programs[id(jaxpr)] = compile_program(jaxpr, self.steps, self._attributes)
        frame: List[Any] = [None] * program.size
        for slot, pair in program.literals:
            frame[slot] = pair
        for slot, pair in zip(program.const_slots, consts):
            frame[slot] = pair
        for slot, pair in zip(program.in_slots, args):
            frame[slot] = pair
        direct = self.direct
        emit = self.emit
        for instruction in program.code:
            kind = instruction[0]
            if kind == OP:
                _, step, in_slots, out_slots = instruction
                ins = [frame[slot] for slot in in_slots]
                values = step.run([value for value, _ in ins], direct)
                if step.described is not None:
                    self._emit_step(step, ins, values, frame, out_slots)
                    continue
                outs = emit(step.name, ins, values, step.attributes, step.replay)
            elif kind == CONSTANT:
                frame[instruction[2]] = self.constant(instruction[1])
                continue
            else:
                _, eqn, in_slots, out_slots = instruction
                outs = self.equation(eqn, [frame[slot] for slot in in_slots])
            for slot, pair in zip(out_slots, outs):
                if slot is not None:
                    frame[slot] = pair
        return [frame[slot] for slot in program.out_slots]

    def _walk(self, jaxpr: Any, consts: Sequence[Pair], args: Sequence[Pair]) -> List[Pair]:
        """The top level of an attributed module root, walked equation by equation: the scope
        hook reads the environment of jaxpr variables before each equation."""
        env: Dict[Any, Pair] = {}
        for var, pair in zip(jaxpr.constvars, consts):
            env[var] = pair
        for var, pair in zip(jaxpr.invars, args):
            env[var] = pair

        def read(atom: Any) -> Pair:
            if isinstance(atom, _Literal):
                return atom.val, None
            return env[atom]

        hook = self.scope_hook
        for index, eqn in enumerate(jaxpr.eqns):
            hook(eqn, index, env)
            ins = [read(atom) for atom in eqn.invars]
            outs = self.equation(eqn, ins)
            for var, pair in zip(eqn.outvars, outs):
                if not isinstance(var, _DropVar):
                    env[var] = pair
        if self.scope_close is not None:
            self.scope_close(env)
        return [read(atom) for atom in jaxpr.outvars]

    def run_closed(self, closed: Any, args: Sequence[Pair]) -> List[Pair]:
        consts = [self.constant(value) for value in closed.consts]
        return self.run(closed.jaxpr, consts, args)

    def equation(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        name = eqn.primitive.name
        if name in CALL_PRIMITIVES:
            return self._inline(eqn, ins)
        if name == "scan":
            return self._scan(eqn, ins)
        if name == "cond":
            return self._cond(eqn, ins)
        if name == "while":
            return self._while(eqn, ins)
        if name in REGION_PRIMITIVES:
            return self._region(eqn, ins)
        if name == "custom_linear_solve":
            return self._linear_solve(eqn, ins)
        step = self.steps.get(id(eqn))
        if step is None:
            step = self.steps[id(eqn)] = Step(eqn, self._attributes(eqn))
        values = step.run([value for value, _ in ins], self.direct)
        return self.emit(name, ins, values, step.attributes, step.replay)

    def _inline(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        params = eqn.params
        inner = params.get("jaxpr", params.get("call_jaxpr"))
        if hasattr(inner, "consts"):
            return self.run_closed(inner, ins)
        return self.run(inner, [], ins)

    def _linear_solve(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        """``custom_linear_solve`` (``jnp.linalg.solve``): its forward value is its ``solve``
        jaxpr applied to the solve constants and the right-hand side, which is inlined; the
        other jaxprs only define its derivatives."""
        lengths = eqn.params["const_lengths"]
        start = lengths.matvec + lengths.vecmat
        solve_consts = ins[start : start + lengths.solve]
        rhs = ins[start + lengths.solve + lengths.transpose_solve :]
        return self.run_closed(eqn.params["jaxprs"].solve, list(solve_consts) + list(rhs))

    def _scan(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        params = eqn.params
        length = params["length"]
        if self.mode == "region" or length > self.cap or length == 0:
            return self._region(eqn, ins)
        body = params["jaxpr"]
        consts_count, carry_count = params["num_consts"], params["num_carry"]
        consts = ins[:consts_count]
        carry = ins[consts_count : consts_count + carry_count]
        xs = ins[consts_count + carry_count :]
        body_consts = [self.constant(value) for value in body.consts]
        steps = range(length - 1, -1, -1) if params["reverse"] else range(length)
        per_step: List[List[Tuple[int, Pair]]] = []
        for step in steps:
            slices = []
            for x in xs:
                slicer = IndexInDim(step)
                slices.extend(self.emit("index_in_dim", [x], slicer(x[0]), [("index", str(step))], slicer))
            outs = self.run(body.jaxpr, body_consts, list(consts) + list(carry) + slices)
            carry = outs[:carry_count]
            for k, y in enumerate(outs[carry_count:]):
                if len(per_step) <= k:
                    per_step.append([])
                per_step[k].append((step, y))
        stacked = []
        for entries in per_step:
            ordered = [pair for _, pair in sorted(entries, key=lambda entry: entry[0])]
            stacked.extend(self.emit("stack", ordered, stack(*[value for value, _ in ordered]), [], stack))
        return list(carry) + stacked

    def _cond(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        if self.mode == "region":
            return self._region(eqn, ins)
        branches = eqn.params["branches"]
        index = int(np.clip(int(ins[0][0]), 0, len(branches) - 1))
        return self.run_closed(branches[index], ins[1:])

    def _while(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        params = eqn.params
        cond, body = params["cond_jaxpr"], params["body_jaxpr"]
        cond_count, body_count = params["cond_nconsts"], params["body_nconsts"]
        cond_consts = [value for value, _ in ins[:cond_count]]
        body_consts = ins[cond_count : cond_count + body_count]
        carry = ins[cond_count + body_count :]
        if self.mode == "region":
            return self._region(eqn, ins)
        # Count the trips first, values only, so an over-cap loop records nothing per trip.
        cond_fn, body_fn = jcore.jaxpr_as_fun(cond), jcore.jaxpr_as_fun(body)
        values = [value for value, _ in carry]
        body_values = [value for value, _ in body_consts]
        trips = 0
        while trips <= self.cap and bool(cond_fn(*cond_consts, *values)[0]):
            values = body_fn(*body_values, *values)
            trips += 1
        if trips > self.cap:
            return self._region(eqn, ins)
        # Unroll: each trip records the loop test that admitted it and the body; the final,
        # failing test is recorded too, so the predicate's ops are in the graph.
        test_consts = [self.constant(value) for value in cond.consts]
        inner_consts = [self.constant(value) for value in body.consts]
        test_ins = list(ins[:cond_count])
        for _ in range(trips):
            self.run(cond.jaxpr, test_consts, test_ins + list(carry))
            carry = self.run(body.jaxpr, inner_consts, list(body_consts) + list(carry))
        self.run(cond.jaxpr, test_consts, test_ins + list(carry))
        return carry

    def _region(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        """One boundary node (its output is a token with no value) and one projection node
        per output. The boundary is opaque to replay; each projection is replayed by re-running
        the whole region from the boundary's parents and taking its output (the region's seams)."""
        name = eqn.primitive.name
        subfuns, params = bind_params(eqn.primitive, eqn.params)
        call = Bind(eqn.primitive, params, subfuns)
        values = call(*[value for value, _ in ins])
        parents = [(value_id, position) for position, (_, value_id) in enumerate(ins) if value_id is not None]
        template = tuple(self._placeholder(value, value_id) for value, value_id in ins)
        token = self.session.new_value_id()
        attributes = [("region", "true")] + self._attributes(eqn)
        self.session.op(
            name, parents, [(token, None, [], "region_token")], False, attributes, None, keep=False
        )
        self.records[token] = ReplayRecord(call, name, template, opaque=True)
        pairs = []
        for index, (value, aval) in enumerate(zip(values, (var.aval for var in eqn.outvars))):
            value_id = self.session.new_value_id()
            self.values[value_id] = value
            shape, dtype = describe(value) if hasattr(value, "dtype") else describe_aval(aval)
            self.session.op(
                "region_output",
                [(token, 0)],
                [(value_id, value, shape, dtype)],
                False,
                [("index", str(index))],
                None,
            )
            self.records[value_id] = ReplayRecord(call, "region_output", template, {}, index, seam=True)
            pairs.append((value, value_id))
        return pairs
