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
from torchlens.adapter_kit.program_import import Pair, Program, ProgramImport

from .compat import DropVar, bind_params
from .dispatch import Bind, Step, direct_dispatch_allowed
from .dtypes import describe, describe_aval, keyed
from .program import compile_program, inlined_body
from .refusals import REGION_PRIMITIVES

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


class Capture(ProgramImport):
    """One capture: the kit's program import (:mod:`torchlens.adapter_kit.program_import`) with
    JAX's reading of values (typed PRNG keys, abstract values) and of the equations a compiled
    program hands back (control flow, regions, equations an attributed top level walks)."""

    array_type = _Array

    def __init__(self, session: CaptureSession, mode: str, cap: int, prepared: Any = None) -> None:
        super().__init__(session)
        self.mode = mode
        self.cap = cap
        #: Prepared plain equations (by ``id(eqn)``) and compiled programs (by ``id(jaxpr)``):
        #: shared by every capture of one cached jaxpr (``prepared`` is its cache entry).
        self.steps: Dict[int, Step] = {} if prepared is None else prepared.steps
        self.programs: Dict[int, Program] = {} if prepared is None else prepared.programs
        #: Whether plain equations call their executables directly (see :mod:`.dispatch`).
        self.fast = direct_dispatch_allowed()
        #: Module attribution: called before each top-level equation (``(eqn, index, env)``)
        #: and once after the last (``(env)``).
        self.scope_hook: Optional[Callable[[Any, int, dict], None]] = None
        self.scope_close: Optional[Callable[[dict], None]] = None

    # ---- the kit's hooks -----------------------------------------------------------------

    describe = staticmethod(describe)

    def as_value(self, value: Any) -> Any:
        # A primitive applied to a literal may hand the literal back (stop_gradient).
        return as_array(value)

    def tag_attributes(self, attributes: Any, pairs: List[Pair]) -> Any:
        for value, _ in pairs:
            if keyed(value.dtype):
                # A typed key is recorded as its key data; say which implementation it is.
                if not any(key == "jax_key_impl" for key, _ in attributes):
                    return list(attributes) + [("jax_key_impl", str(jax.random.key_impl(value)))]
                break
        return attributes

    def nested(self, eqn: Any, ins: List[Pair]) -> List[Pair]:
        return self.equation(eqn, ins)

    def output(self, name: str, pair: Pair, copy: Any = copy_value) -> None:
        super().output(name, pair, copy)

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
        return self.run_program(program, consts, args)

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
        inner, inner_args = inlined_body(eqn, ins)
        if inner is not None:
            if hasattr(inner, "consts"):
                return self.run_closed(inner, inner_args)
            return self.run(inner, [], inner_args)
        if name == "scan":
            return self._scan(eqn, ins)
        if name == "cond":
            return self._cond(eqn, ins)
        if name == "while":
            return self._while(eqn, ins)
        if name in REGION_PRIMITIVES:
            return self._region(eqn, ins)
        step = self.steps.get(id(eqn))
        if step is None:
            step = self.steps[id(eqn)] = Step(eqn, self._attributes(eqn))
        values = step.run([value for value, _ in ins], self.fast)
        return self.op(name, ins, values, step.attributes, step.replay)

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
                slices.extend(self.op("index_in_dim", [x], slicer(x[0]), [("index", str(step))], slicer))
            outs = self.run(body.jaxpr, body_consts, list(consts) + list(carry) + slices)
            carry = outs[:carry_count]
            for k, y in enumerate(outs[carry_count:]):
                if len(per_step) <= k:
                    per_step.append([])
                per_step[k].append((step, y))
        stacked = []
        for entries in per_step:
            ordered = [pair for _, pair in sorted(entries, key=lambda entry: entry[0])]
            stacked.extend(self.op("stack", ordered, stack(*[value for value, _ in ordered]), [], stack))
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
        """One boundary node and one projection node per output (the kit's region)."""
        subfuns, params = bind_params(eqn.primitive, eqn.params)
        avals = [var.aval for var in eqn.outvars]
        return self.region(
            eqn.primitive.name,
            ins,
            Bind(eqn.primitive, params, subfuns),
            self._attributes(eqn),
            lambda index: describe_aval(avals[index]),
        )
