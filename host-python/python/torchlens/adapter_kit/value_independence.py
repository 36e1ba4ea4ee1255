"""Which functions' outputs do not depend on the values of their inputs, one table for every
backend's replay: such an op is checked by replay alone, since no perturbation of an input can
move its output (a zero fill, a ``*_like`` constructor, a shape query).

Functions are recognised by the core's normalized op type (``zero_`` → ``zero``, ``zeros_like``
→ ``zeroslike``), so the same entry covers every framework's spelling. Only functions whose
output is fully determined by shapes, dtypes and literal arguments belong here; a function with
a value-dependent part (``masked_fill`` keeps the unmasked values) does not: perturbation
proves its edge through that part."""

from __future__ import annotations

from typing import Dict

from .live_plan import OpTypes

#: Normalized op type → why its output ignores input values.
VALUE_INDEPENDENT_OP_TYPES: Dict[str, str] = {
    # In-place and out-of-place fills: the input only lends its shape, dtype and storage.
    "zero": "in-place zero fill",
    "fill": "fill with a literal",
    # Constructors shaped like an input.
    "zeroslike": "zeros shaped like the input",
    "oneslike": "ones shaped like the input",
    "emptylike": "uninitialised, shaped like the input",
    "fulllike": "a literal shaped like the input",
    "newzeros": "zeros from the input's dtype and device",
    "newones": "ones from the input's dtype and device",
    "newempty": "uninitialised, from the input's dtype and device",
    "newfull": "a literal from the input's dtype and device",
    # Shape, rank and size queries.
    "size": "the input's shape",
    "shape": "the input's shape",
    "dim": "the input's rank",
    "ndim": "the input's rank",
    "numel": "the input's element count",
    "len": "the input's leading dimension",
}


def value_independent(func_name: str) -> bool:
    """Whether ``func_name``'s output is determined without its inputs' values."""
    return OpTypes.of(func_name) in VALUE_INDEPENDENT_OP_TYPES
