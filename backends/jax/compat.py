"""JAX names that moved between the supported releases: ``jax.extend.core`` exports
``DropVar`` and ``jaxprs_in_params`` only on newer JAX; older releases (0.7.1, the declared
minimum) keep them in ``jax.core``, where newer releases deprecate or drop them."""

from __future__ import annotations

from typing import Any, Tuple

import jax
from jax.extend import core as jcore

DropVar = getattr(jcore, "DropVar", None) or jax.core.DropVar
jaxprs_in_params = getattr(jcore, "jaxprs_in_params", None) or jax.core.jaxprs_in_params


def bind_params(primitive: Any, params: dict) -> Tuple[tuple, dict]:
    """``(subfuns, params)`` for ``primitive.bind(*subfuns, *args, **params)``. Older JAX
    (0.7.1) returns that pair from ``get_bind_params``; newer JAX returns the params alone."""
    got = primitive.get_bind_params(params)
    if isinstance(got, tuple):
        subfuns, bound = got
        return tuple(subfuns), bound
    return (), got
