"""JAX dtypes ⇄ the core's framework-neutral dtype names, and how a value is described."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import jax
import numpy as np

#: NumPy dtype names whose neutral name differs.
_RENAMED = {"float8_e4m3fn": "float8_e4m3"}

_CACHE: Dict[Any, Tuple[bool, str]] = {}


def is_key(dtype: Any) -> bool:
    """A typed PRNG key dtype (``key<fry>``)."""
    return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _classify(dtype: Any) -> Tuple[bool, str]:
    cached = _CACHE.get(dtype)
    if cached is None:
        if is_key(dtype):
            cached = (True, "uint32")
        else:
            name = np.dtype(dtype).name
            cached = (False, _RENAMED.get(name, name))
        _CACHE[dtype] = cached
    return cached


def describe(value: Any) -> Tuple[list, str]:
    """Shape and neutral dtype as the trace records them. A typed PRNG key is recorded as its
    key data (``uint32``, the key's shape plus the implementation's trailing axes), which is
    what a ``.tlspec`` stores; the key's implementation travels in the codec metadata."""
    keyed, name = _classify(value.dtype)
    if keyed:
        return list(jax.random.key_data(value).shape), name
    return list(value.shape), name


def describe_aval(aval: Any) -> Tuple[list, str]:
    """Shape and neutral dtype of an abstract value (values a region never materialises)."""
    keyed, name = _classify(aval.dtype)
    shape = list(aval.shape)
    if keyed:
        shape += list(aval.dtype._impl.key_shape)
    return shape, name


def keyed(dtype: Any) -> bool:
    """``is_key``, cached by dtype (the capture asks once per value)."""
    return _classify(dtype)[0]


def neutral_name(dtype: Any) -> str:
    return _classify(dtype)[1]
