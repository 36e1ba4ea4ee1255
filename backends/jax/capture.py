"""One capture of a JAX function: its jaxpr (traced once per call signature, see
:mod:`.jaxpr_cache`) walked by the kit (:mod:`torchlens.adapter_kit.program_walk`) with real
values, each plain equation through the executable its eager bind would run (:mod:`.dispatch`).
This module reads jaxprs for the kit: nested pure ``jit`` calls, ``custom_jvp`` calls and
``custom_linear_solve``'s solve are inlined; ``scan``, ``cond`` and ``while`` are control flow
the kit unrolls (over-cap loops become regions); ``custom_vjp`` calls are regions (one boundary
node, one projection node per output)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import jax
from jax.extend import core as jcore

from torchlens.adapter_kit import CaptureSession
from torchlens.adapter_kit.attribute_text import rendered_attributes
from torchlens.adapter_kit.program_import import Pair
from torchlens.adapter_kit.program_walk import Branch, CountedLoop, ProgramWalk, WhileLoop

from .compat import DropVar, bind_params
from .dispatch import Bind, Step, direct_dispatch_allowed
from .dtypes import describe, describe_aval, keyed
from .refusals import CALL_PRIMITIVES, REGION_PRIMITIVES

_Literal = jcore.Literal
_Array = jax.Array
_DropVar = DropVar

#: Equations the kit walks itself (their nested jaxprs are decided at run time).
_WALKED = frozenset({"scan", "cond", "while"}) | REGION_PRIMITIVES


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


def attributes(eqn: Any) -> list:
    """The equation's parameters that render as text, and its literal arguments."""
    found = rendered_attributes(eqn.params.items())
    for position, atom in enumerate(eqn.invars):
        if isinstance(atom, _Literal):
            found.append((f"arg{position}", str(atom.val)))
    return found


class Capture(ProgramWalk):
    """One capture: the kit's program walk with JAX's reading of jaxprs and of values (typed
    PRNG keys, abstract values)."""

    array_type = _Array
    slice_op_name = "index_in_dim"
    slicer = IndexInDim
    stacker = staticmethod(stack)
    describe = staticmethod(describe)

    def __init__(self, session: CaptureSession, mode: str, cap: int, prepared: Any = None) -> None:
        super().__init__(session, mode, cap, prepared)
        #: Whether plain equations call their executables directly (see :mod:`.dispatch`).
        self.fast = direct_dispatch_allowed()

    # ---- values ----------------------------------------------------------------------------

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

    def output(self, name: str, pair: Pair, copy: Any = copy_value) -> None:
        super().output(name, pair, copy)

    # ---- jaxprs ----------------------------------------------------------------------------

    def unclose(self, body: Any) -> Tuple[Any, Any]:
        return getattr(body, "jaxpr", body), getattr(body, "consts", ())

    def parts(self, body: Any) -> Tuple[Any, Any, Any, Any]:
        return body.constvars, body.invars, body.outvars, body.eqns

    def equation_vars(self, eqn: Any) -> Tuple[Any, Any]:
        return eqn.invars, eqn.outvars

    def literal(self, atom: Any) -> Optional[Tuple[Any]]:
        return (atom.val,) if isinstance(atom, _Literal) else None

    def dropped(self, var: Any) -> bool:
        return isinstance(var, _DropVar)

    def prepare(self, eqn: Any) -> Step:
        return Step(eqn, attributes(eqn))

    def walked(self, eqn: Any) -> bool:
        return eqn.primitive.name in _WALKED

    def inlined(self, eqn: Any, ins: List[Any]) -> Tuple[Any, List[Any]]:
        name = eqn.primitive.name
        params = eqn.params
        if name in CALL_PRIMITIVES:
            return params.get("jaxpr", params.get("call_jaxpr")), ins
        if name == "custom_linear_solve":
            # Its forward value is its ``solve`` jaxpr on the solve constants and the right-hand
            # side; the other jaxprs only define its derivatives.
            lengths = params["const_lengths"]
            start = lengths.matvec + lengths.vecmat
            solve_consts = ins[start : start + lengths.solve]
            rhs = ins[start + lengths.solve + lengths.transpose_solve :]
            return params["jaxprs"].solve, list(solve_consts) + list(rhs)
        return None, []

    def control(self, eqn: Any, ins: List[Pair]) -> Any:
        name = eqn.primitive.name
        params = eqn.params
        if name == "scan":
            consts, carry = params["num_consts"], params["num_carry"]
            return CountedLoop(
                params["length"],
                params["reverse"],
                params["jaxpr"],
                ins[:consts],
                ins[consts : consts + carry],
                ins[consts + carry :],
            )
        if name == "cond":
            return Branch(ins[0][0], params["branches"], ins[1:])
        if name == "while":
            tests, bodies = params["cond_nconsts"], params["body_nconsts"]
            return WhileLoop(
                params["cond_jaxpr"],
                params["body_jaxpr"],
                ins[:tests],
                ins[tests : tests + bodies],
                ins[tests + bodies :],
            )
        return None

    def region_parts(self, eqn: Any) -> Tuple[str, Bind, list, Any]:
        subfuns, params = bind_params(eqn.primitive, eqn.params)
        avals = [var.aval for var in eqn.outvars]

        def describe_missing(index: int) -> Tuple[list, str]:
            return describe_aval(avals[index])

        return eqn.primitive.name, Bind(eqn.primitive, params, subfuns), attributes(eqn), describe_missing

    def as_function(self, body: Any) -> Any:
        return jcore.jaxpr_as_fun(body)
