"""A jaxpr compiled once for the capture's walk onto the kit's slot ``Program`` (which
``ProgramImport.run_program`` runs): every variable becomes a slot of a flat frame,
nested pure calls (``jit``, ``custom_jvp``, ``custom_linear_solve``'s solve) are inlined at
compile time, and each plain equation becomes one instruction holding its prepared
:class:`~.dispatch.Step`. Running a program does what walking the jaxpr did, event for event
(the same values, the same ids, the same order), without re-reading the jaxpr: control flow and
regions (``scan``, ``cond``, ``while``, ``custom_vjp``) stay instructions that hand their
equation to the capture, which decides at run time (a ``cond`` branch, a loop's trip count)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from jax.extend import core as jcore

from torchlens.adapter_kit.program_import import CONSTANT, NESTED, OP, Program

from .compat import DropVar
from .dispatch import Step
from .refusals import CALL_PRIMITIVES

_Literal = jcore.Literal
_DropVar = DropVar


def compile_program(jaxpr: Any, steps: Dict[int, Step], attributes: Callable[[Any], list]) -> Program:
    """``jaxpr`` (a ``Jaxpr``) compiled; ``steps`` caches prepared equations by ``id(eqn)``,
    ``attributes(eqn)`` renders an equation's attributes."""
    program = Program()
    env: Dict[Any, int] = {}
    for var in jaxpr.constvars:
        env[var] = program.slot()
        program.const_slots.append(env[var])
    for var in jaxpr.invars:
        env[var] = program.slot()
        program.in_slots.append(env[var])
    program.out_slots = _inline(program, jaxpr, env, steps, attributes)
    return program


def _read(program: Program, env: Dict[Any, int], atom: Any) -> int:
    return program.literal(atom.val) if isinstance(atom, _Literal) else env[atom]


def _inline(
    program: Program,
    jaxpr: Any,
    env: Dict[Any, int],
    steps: Dict[int, Step],
    attributes: Callable[[Any], list],
) -> List[int]:
    """Compiles ``jaxpr``'s equations into ``program`` with its variables bound by ``env``;
    returns the slots of its outputs."""
    for eqn in jaxpr.eqns:
        in_slots = [_read(program, env, atom) for atom in eqn.invars]
        name = eqn.primitive.name
        inner, inner_args = inlined_body(eqn, in_slots)
        if inner is not None:
            body = getattr(inner, "jaxpr", inner)
            inner_env: Dict[Any, int] = {}
            for var, value in zip(body.constvars, getattr(inner, "consts", ())):
                inner_env[var] = program.slot()
                program.code.append((CONSTANT, value, inner_env[var]))
            for var, slot in zip(body.invars, inner_args):
                inner_env[var] = slot
            outs: List[Optional[int]] = list(_inline(program, body, inner_env, steps, attributes))
        else:
            outs = [None if isinstance(var, _DropVar) else program.slot() for var in eqn.outvars]
            if name in _WALKED:
                program.code.append((NESTED, eqn, in_slots, outs))
            else:
                step = steps.get(id(eqn))
                if step is None:
                    step = steps[id(eqn)] = Step(eqn, attributes(eqn))
                program.code.append((OP, step, in_slots, outs))
        for var, slot in zip(eqn.outvars, outs):
            if not isinstance(var, _DropVar):
                env[var] = slot
    return [_read(program, env, atom) for atom in jaxpr.outvars]


#: Equations the capture walks itself (their nested jaxprs are decided at run time).
_WALKED = frozenset({"scan", "cond", "while", "custom_vjp_call", "custom_vjp_call_jaxpr"})


def inlined_body(eqn: Any, in_slots: List[int]) -> Tuple[Any, List[int]]:
    """The body a pure call inlines and which of ``in_slots`` (slots, or the capture's pairs)
    are its arguments, or (None, [])."""
    name = eqn.primitive.name
    params = eqn.params
    if name in CALL_PRIMITIVES:
        return params.get("jaxpr", params.get("call_jaxpr")), in_slots
    if name == "custom_linear_solve":
        # Its forward value is its ``solve`` jaxpr on the solve constants and the right-hand
        # side; the other jaxprs only define its derivatives.
        lengths = params["const_lengths"]
        start = lengths.matvec + lengths.vecmat
        solve_consts = in_slots[start : start + lengths.solve]
        rhs = in_slots[start + lengths.solve + lengths.transpose_solve :]
        return params["jaxprs"].solve, list(solve_consts) + list(rhs)
    return None, []
