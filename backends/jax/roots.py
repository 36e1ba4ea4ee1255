"""What is being traced: a raw callable ``fn(params, *inputs)`` or a module root (Equinox,
Flax NNX), its array leaves (parameters and inputs, with their paths), and a flat function of
those leaves that ``jax.make_jaxpr`` can trace."""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Tuple

import jax
import numpy as np

from torchlens.adapter_kit.flat_call import FlatCall
from torchlens.adapter_kit.package_files import in_packages

from .refusals import refuse

#: Modules whose callables are transforms of a user function.
_TRANSFORM_MODULES = (
    "jax.",
    "jaxlib.",
    "equinox._jit",
    "equinox._vmap_pmap",
    "equinox._ad",
    "flax.nnx.transforms",
)


def key_name(entry: Any) -> str:
    for attribute in ("key", "name", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def is_dynamic(leaf: Any) -> bool:
    """Array leaves are traced; every other leaf (Python numbers, functions, strings) is static."""
    return isinstance(leaf, (jax.Array, np.ndarray))


def framework_of(model: Any) -> Optional[str]:
    """``equinox`` or ``flax_nnx`` for a module root, None for a raw callable. Reads only
    modules the caller has already imported."""
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(model, eqx.Module) and not _is_transform(model):
        return "equinox"
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(model, nnx.Module):
        return "flax_nnx"
    return None


def _is_transform(model: Any) -> bool:
    return type(model).__module__.startswith(_TRANSFORM_MODULES)


def _jax_transform_function(function: Any, depth: int = 0) -> bool:
    """Whether a Python function is one a jax transform returned (``vmap_f``, ``grad_f``,
    ``jacfun`` ...). JAX wraps both its transforms and some library entry points (Flax's
    ``Module.apply``) in a traceback-filtering wrapper; the wrapped function tells them apart."""
    code = getattr(function, "__code__", None)
    if code is None or depth > 4 or not in_packages(code.co_filename, ("jax",)):
        return False
    if code.co_name != "reraise_with_filtered_traceback":
        return True
    for cell in getattr(function, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        if callable(inner) and _jax_transform_function(inner, depth + 1):
            return True
    return False


def check_root(model: Any, leaves: List[Any]) -> None:
    """Refuses transformed roots (``jax.jit``, ``jax.vmap``, ``jax.grad``, Equinox filter
    transforms) and captures started from inside a transform (tracer inputs)."""
    transformed = (
        _is_transform(model)
        or (hasattr(model, "lower") and hasattr(model, "trace"))
        or _jax_transform_function(model)
    )
    if transformed:
        raise refuse(
            f"the root callable {getattr(model, '__name__', type(model).__name__)} is a jax transform "
            "(jit, vmap or grad)",
            "transformed_root_callable",
            "trace the plain function; apply jax.jit/vmap/grad outside tl.trace",
        )
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        raise refuse(
            "tl.trace was called from inside a jax transform (its inputs are tracers)",
            "transformed_root_callable",
            "call tl.trace outside jax.jit / jax.vmap / jax.grad",
        )


class Root(FlatCall):
    """The traced call split into parameter leaves and input leaves (the kit's flat call over
    JAX's pytrees)."""

    def flatten(self, tree: Any) -> Tuple[list, Any]:
        return jax.tree_util.tree_flatten_with_path(tree)

    def unflatten(self, structure: Any, leaves: List[Any]) -> Any:
        return jax.tree_util.tree_unflatten(structure, leaves)

    entry_name = staticmethod(key_name)
    is_dynamic = staticmethod(is_dynamic)

    #: An output leaf is an array, a tracer (the call is traced) or a number.
    output_leaf_types = (jax.Array, jax.core.Tracer, np.ndarray, np.generic, int, float, complex)
