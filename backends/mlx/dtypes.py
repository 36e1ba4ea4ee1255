"""MLX dtypes and the core's neutral dtype names."""

from __future__ import annotations

from typing import Any

import mlx.core as mx


def neutral_name(dtype: Any) -> str:
    """The core's name of an MLX dtype: ``mlx.core.float32`` → ``float32``, ``bool_`` → ``bool``."""
    name = str(dtype).rsplit(".", 1)[-1]
    return "bool" if name in ("bool", "bool_") else name


def mlx_dtype(name: str) -> Any:
    """The MLX dtype of a core dtype name."""
    return mx.bool_ if name == "bool" else getattr(mx, name)
