"""Paddle dtypes and the core's neutral dtype names."""

from __future__ import annotations

from typing import Any

import paddle

#: Paddle dtype name (``str(paddle.float32)`` without the ``paddle.`` prefix) → the core's name.
_NEUTRAL = {
    "bool": "bool",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "complex64": "complex64",
    "complex128": "complex128",
    "float8_e4m3fn": "float8_e4m3",
    "float8_e5m2": "float8_e5m2",
}

_PADDLE = {
    "bool": paddle.bool,
    "int8": paddle.int8,
    "uint8": paddle.uint8,
    "int16": paddle.int16,
    "int32": paddle.int32,
    "int64": paddle.int64,
    "float16": paddle.float16,
    "bfloat16": paddle.bfloat16,
    "float32": paddle.float32,
    "float64": paddle.float64,
    "complex64": paddle.complex64,
    "complex128": paddle.complex128,
}


def neutral_name(dtype: Any) -> str:
    """The core's name for a Paddle dtype (``paddle.float32`` → ``float32``)."""
    name = str(dtype).rsplit(".", 1)[-1]
    return _NEUTRAL.get(name, name)


def paddle_dtype(name: str) -> Any:
    """The Paddle dtype of a core dtype name."""
    return _PADDLE[name]
