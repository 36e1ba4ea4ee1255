"""The JAX backend's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import jax.numpy as jnp


def _mlp(params: dict, x: Any) -> Any:
    hidden = jnp.maximum(x @ params["w1"] + params["b1"], 0.0)
    return jnp.tanh(hidden @ params["w2"] + params["b2"])


def example() -> Tuple[Any, tuple]:
    """A function ``fn(params, x)`` (a small MLP) and its inputs."""
    params = {
        "w1": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4),
        "b1": jnp.linspace(-0.5, 0.5, 4),
        "w2": jnp.linspace(1.0, -1.0, 8).reshape(4, 2),
        "b2": jnp.zeros((2,)),
    }
    return _mlp, (params, jnp.linspace(-2.0, 2.0, 6).reshape(2, 3))
