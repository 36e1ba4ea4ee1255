"""The standard models in JAX, as Equinox modules (so module selection has submodules to pick;
a raw ``fn(params, x)`` callable exposes only its root)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import BackendModels, input_grads, standard_models


def _normal(rng: Any, *shape: int) -> jax.Array:
    return jnp.asarray(rng.standard_normal(shape).astype("float32") * 0.5)


class Dense(eqx.Module):
    w: jax.Array
    b: jax.Array

    def __init__(self, rng: Any, fan_in: int, fan_out: int) -> None:
        self.w = _normal(rng, fan_in, fan_out)
        self.b = _normal(rng, fan_out)

    def __call__(self, x):
        return x @ self.w + self.b


class Conv(eqx.Module):
    kernel: jax.Array

    def __init__(self, rng: Any) -> None:
        self.kernel = _normal(rng, 3, 2, 3, 3)

    def __call__(self, x):
        return lax.conv_general_dilated(
            x, self.kernel, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )


class Mlp(eqx.Module):
    fc1: Dense
    fc2: Dense

    def __init__(self, rng: Any) -> None:
        self.fc1, self.fc2 = Dense(rng, 3, 4), Dense(rng, 4, 2)

    def __call__(self, x):
        return self.fc2(jnp.maximum(self.fc1(x), 0.0))


class Cnn(eqx.Module):
    conv: Conv
    head: Dense

    def __init__(self, rng: Any) -> None:
        self.conv, self.head = Conv(rng), Dense(rng, 3, 2)

    def __call__(self, x):
        return self.head(jnp.maximum(self.conv(x), 0.0).mean(axis=(2, 3)))


class Attention(eqx.Module):
    qkv: Dense
    out: Dense

    def __init__(self, rng: Any) -> None:
        self.qkv, self.out = Dense(rng, 4, 12), Dense(rng, 4, 4)

    def __call__(self, x):
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)
        weights = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / 2.0, axis=-1)
        return self.out(jnp.maximum(weights @ v, 0.0))


class Shared(eqx.Module):
    block: Dense

    def __init__(self, rng: Any) -> None:
        self.block = Dense(rng, 4, 4)

    def __call__(self, x):
        return self.block(jnp.maximum(self.block(x), 0.0))


def _build(cls: type, seed: int, shape: tuple) -> Any:
    def build():
        rng = np.random.default_rng(seed)
        return cls(rng), (_normal(np.random.default_rng(seed + 100), *shape) * 2.0,)

    return build


MODELS = BackendModels(
    models=standard_models(_build, (Mlp, Cnn, Attention, Shared), "max"),
    to_array=jnp.asarray,
    grad_options=input_grads("jax"),
)
