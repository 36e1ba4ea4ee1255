"""tinygrad dtypes and the core's neutral dtype names."""

from __future__ import annotations

from typing import Any

import numpy as np
from tinygrad import dtypes

#: tinygrad dtype name → the core's name (tinygrad names follow C: ``float``, ``long``).
_NEUTRAL = {
    "bool": "bool",
    "char": "int8",
    "uchar": "uint8",
    "short": "int16",
    "ushort": "uint16",
    "int": "int32",
    "uint": "uint32",
    "long": "int64",
    "ulong": "uint64",
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "bfloat16": "bfloat16",
    "fp8e4m3": "float8_e4m3",
    "fp8e5m2": "float8_e5m2",
}

_TINYGRAD = {
    "bool": dtypes.bool,
    "int8": dtypes.int8,
    "uint8": dtypes.uint8,
    "int16": dtypes.int16,
    "uint16": dtypes.uint16,
    "int32": dtypes.int32,
    "uint32": dtypes.uint32,
    "int64": dtypes.int64,
    "uint64": dtypes.uint64,
    "float16": dtypes.float16,
    "float32": dtypes.float32,
    "float64": dtypes.float64,
    "bfloat16": dtypes.bfloat16,
}


def neutral_name(dtype: Any) -> str:
    """The core's name for a tinygrad dtype (``dtypes.float`` → ``float32``)."""
    name = getattr(dtype, "name", str(dtype))
    return _NEUTRAL.get(name, name)


def tinygrad_dtype(name: str) -> Any:
    """The tinygrad dtype of a core dtype name."""
    return _TINYGRAD[name]


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype values of a core dtype name travel as (bit-carriers excluded)."""
    return np.dtype(name)


def is_weak(dtype: Any) -> bool:
    """Whether a dtype is one of tinygrad 0.14's weak literal dtypes (no storage)."""
    return dtype in getattr(dtypes, "weaks", ())
