"""TensorFlow dtypes and the core's neutral dtype names."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from torchlens.adapter_kit.dtype_names import CORE_DTYPES

#: Neutral names of the dtypes whose values are dense arrays (saved, replayed, compared): the
#: core's, except the float8 formats, which this backend does not carry.
DENSE = frozenset(name for name in CORE_DTYPES if not name.startswith("float8"))

#: Neutral names of the dtypes whose values a capture keeps (dense arrays and strings).
KEPT = DENSE | {"string"}


def neutral_name(dtype: Any) -> str:
    """The core's name for a TensorFlow dtype (``tf.float32`` → ``float32``); string, resource
    and variant keep TensorFlow's names and are not dense."""
    return getattr(dtype, "name", str(dtype))


def tf_dtype(name: str) -> Any:
    """The TensorFlow dtype of a core dtype name."""
    return tf.dtypes.as_dtype(name)
