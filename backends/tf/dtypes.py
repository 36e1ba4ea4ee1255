"""TensorFlow dtypes and the core's neutral dtype names."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

#: Neutral names of the dtypes whose values are dense arrays (saved, replayed, compared).
DENSE = frozenset(
    {
        "bool",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    }
)

#: Neutral names of the dtypes whose values a capture keeps (dense arrays and strings).
KEPT = DENSE | {"string"}


def neutral_name(dtype: Any) -> str:
    """The core's name for a TensorFlow dtype (``tf.float32`` → ``float32``); string, resource
    and variant keep TensorFlow's names and are not dense."""
    return getattr(dtype, "name", str(dtype))


def tf_dtype(name: str) -> Any:
    """The TensorFlow dtype of a core dtype name."""
    return tf.dtypes.as_dtype(name)
