"""The JAX models: the conformance suite's four standard models (:data:`MODELS`), as Equinox
modules (so module selection has submodules to pick; a raw ``fn(params, x)`` callable exposes
only its root), and the JAX tests' battery of raw functions shaped like ``fn(params, *inputs)``
(:func:`battery`), each with a builder of its arguments."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
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


# The battery: raw functions of their parameters and inputs (the capture of a plain callable).


def _key_normal(seed: int, shape: tuple) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, dtype=jnp.float32)


def mlp(params, x):
    h = jax.nn.relu(x @ params["fc1"]["w"] + params["fc1"]["b"])
    return h @ params["fc2"]["w"] + params["fc2"]["b"]


def mlp_args():
    params = {
        "fc1": {"w": _key_normal(0, (8, 16)), "b": _key_normal(1, (16,))},
        "fc2": {"w": _key_normal(2, (16, 4)), "b": _key_normal(3, (4,))},
    }
    return params, _key_normal(4, (2, 8))


def cnn(params, x):
    y = lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = jnp.tanh(y + params["b1"][None, :, None, None])
    y = lax.conv_general_dilated(y, params["k2"], (2, 2), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jnp.mean(y, axis=(2, 3)) @ params["head"]


def cnn_args():
    params = {
        "k1": _key_normal(10, (4, 3, 3, 3)),
        "b1": _key_normal(11, (4,)),
        "k2": _key_normal(12, (6, 4, 3, 3)),
        "head": _key_normal(13, (6, 5)),
    }
    return params, _key_normal(14, (2, 3, 8, 8))


def attention(params, x):
    q, k, v = x @ params["q"], x @ params["k"], x @ params["v"]
    scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(jnp.float32(q.shape[-1]))
    return jax.nn.softmax(scores, axis=-1) @ v @ params["o"]


def attention_args():
    params = {name: _key_normal(20 + i, (8, 8)) for i, name in enumerate("qkvo")}
    return params, _key_normal(30, (2, 5, 8))


def scan_rnn(params, xs):
    def cell(h, x):
        h = jnp.tanh(h @ params["wh"] + x @ params["wx"])
        return h, h * 2.0

    h, ys = lax.scan(cell, jnp.zeros((2, 4)), xs)
    return h, ys


def scan_rnn_args(steps: int = 3):
    params = {"wh": _key_normal(40, (4, 4)), "wx": _key_normal(41, (3, 4))}
    return params, _key_normal(42, (steps, 2, 3))


def while_loop(params, x):
    def body(state):
        i, v = state
        return i + 1, jnp.sin(v * params["scale"])

    return lax.while_loop(lambda state: state[0] < 3, body, (0, x))[1]


def while_args():
    return {"scale": jnp.float32(1.5)}, _key_normal(50, (4,))


def cond_fn(params, x):
    y = x * params["a"]
    return lax.cond(jnp.sum(y) > 0, lambda v: jnp.exp(v), lambda v: -v, y)


def cond_args(positive: bool = True):
    x = jnp.abs(_key_normal(60, (3,)))
    return {"a": jnp.float32(1.0)}, x if positive else -x


CONSTANT = jnp.arange(4.0)


def closure_constant(params, x):
    return x * params["s"] + CONSTANT


def closure_args():
    return {"s": jnp.float32(2.0)}, _key_normal(70, (4,))


def nested_jit(params, x):
    inner = jax.jit(lambda v, w: jnp.cos(v @ w))
    return inner(x, params["w"]) + 1.0


def nested_jit_args():
    return {"w": _key_normal(80, (3, 3))}, _key_normal(81, (2, 3))


@jax.custom_vjp
def clipped(x):
    return jnp.clip(x, -1.0, 1.0)


clipped.defvjp(lambda x: (clipped(x), x), lambda x, g: (g,))


def custom_vjp_fn(params, x):
    return clipped(x * params["a"]) + 1.0


def custom_vjp_args():
    return {"a": jnp.float32(3.0)}, _key_normal(90, (5,))


def battery():
    """``(name, fn, args)`` for every function with no region (replay passes in full)."""
    return [
        ("mlp", mlp, mlp_args()),
        ("cnn", cnn, cnn_args()),
        ("attention", attention, attention_args()),
        ("scan_rnn", scan_rnn, scan_rnn_args()),
        ("while_loop", while_loop, while_args()),
        ("cond", cond_fn, cond_args()),
        ("closure_constant", closure_constant, closure_args()),
        ("nested_jit", nested_jit, nested_jit_args()),
    ]


# The module-root models: Equinox and Flax NNX module trees the module tests trace.


class NnxMlp(nnx.Module):
    """A Flax NNX MLP with a batch norm and a list of blocks (a module tree to attribute)."""

    def __init__(self, rngs):
        self.fc1 = nnx.Linear(3, 4, rngs=rngs)
        self.norm = nnx.BatchNorm(4, rngs=rngs)
        self.blocks = nnx.List([nnx.Linear(4, 4, rngs=rngs), nnx.Linear(4, 2, rngs=rngs)])

    def __call__(self, x):
        h = self.norm(self.fc1(x))
        for block in self.blocks:
            h = jax.nn.relu(block(h))
        return h


def nnx_mlp() -> NnxMlp:
    """An :class:`NnxMlp` in eval mode."""
    model = NnxMlp(nnx.Rngs(0))
    model.eval()
    return model


class EqxConvAttention(eqx.Module):
    """Equinox convolution, pool, layer norm and multi-head attention in one module tree."""

    conv: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d
    norm: eqx.nn.LayerNorm
    attention: eqx.nn.MultiheadAttention
    head: eqx.nn.Linear

    def __init__(self):
        keys = jax.random.split(jax.random.key(3), 3)
        self.conv = eqx.nn.Conv2d(3, 4, 3, padding=1, key=keys[0])
        self.pool = eqx.nn.MaxPool2d(2, 2)
        self.norm = eqx.nn.LayerNorm(4)
        self.attention = eqx.nn.MultiheadAttention(2, 4, key=keys[1])
        self.head = eqx.nn.Linear(4, 2, key=keys[2])

    def __call__(self, x):
        sequence = self.pool(jax.nn.relu(self.conv(x))).reshape(4, -1).T
        sequence = jax.vmap(self.norm)(sequence)
        return jax.vmap(self.head)(self.attention(sequence, sequence, sequence))


class NnxConvAttention(nnx.Module):
    """Flax NNX convolution, multi-head attention and layer norm in one module tree."""

    def __init__(self, rngs):
        self.conv = nnx.Conv(3, 4, (3, 3), rngs=rngs)
        self.attention = nnx.MultiHeadAttention(num_heads=2, in_features=4, decode=False, rngs=rngs)
        self.norm = nnx.LayerNorm(4, rngs=rngs)

    def __call__(self, x):
        sequence = jax.nn.relu(self.conv(x)).reshape(1, -1, 4)
        return self.norm(self.attention(sequence))


class StatefulNet(eqx.Module):
    """An Equinox model with state (a batch norm) and a keyed dropout."""

    linear: eqx.nn.Linear
    norm: eqx.nn.BatchNorm
    dropout: eqx.nn.Dropout

    def __init__(self, key):
        self.linear = eqx.nn.Linear(3, 4, key=key)
        self.norm = eqx.nn.BatchNorm(4, axis_name="batch", inference=True)
        self.dropout = eqx.nn.Dropout(0.5)

    def __call__(self, x, state, *, key=None):
        h, state = self.norm(self.linear(x), state)
        return self.dropout(h, key=key, inference=key is None), state


# The benchmark models: the functions benchmarks/jax_overhead.py times, at the sizes
# docs/performance.md publishes.


def benchmark_mlp(params, x):
    for layer in params:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x


def benchmark_mlp_args(layers: int = 8):
    weights = [
        {"w": _key_normal(i, (256, 256)) * 0.05, "b": _key_normal(100 + i, (256,))} for i in range(layers)
    ]
    return weights, _key_normal(0, (32, 256))


def benchmark_cnn(params, x):
    dims = ("NCHW", "OIHW", "NCHW")
    y = jax.nn.relu(lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=dims))
    y = jax.nn.relu(lax.conv_general_dilated(y, params["k2"], (2, 2), "SAME", dimension_numbers=dims))
    return jnp.mean(y, axis=(2, 3)) @ params["head"]


def benchmark_cnn_args():
    params = {
        "k1": _key_normal(1, (16, 3, 3, 3)),
        "k2": _key_normal(2, (32, 16, 3, 3)),
        "head": _key_normal(3, (32, 10)),
    }
    return params, _key_normal(4, (8, 3, 32, 32))


def benchmark_transformer(params, x):
    for block in params:
        q, k, v = x @ block["q"], x @ block["k"], x @ block["v"]
        attention = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / 8.0, axis=-1)
        x = x + attention @ v @ block["o"]
        x = x + jax.nn.gelu(x @ block["up"]) @ block["down"]
    return x


def benchmark_transformer_args():
    blocks = [
        {
            "q": _key_normal(10 * i, (64, 64)) * 0.1,
            "k": _key_normal(10 * i + 1, (64, 64)) * 0.1,
            "v": _key_normal(10 * i + 2, (64, 64)) * 0.1,
            "o": _key_normal(10 * i + 3, (64, 64)) * 0.1,
            "up": _key_normal(10 * i + 4, (64, 256)) * 0.1,
            "down": _key_normal(10 * i + 5, (256, 64)) * 0.1,
        }
        for i in range(4)
    ]
    return blocks, _key_normal(5, (2, 32, 64))


def chain(params, x, steps=500):
    for _ in range(steps):
        x = jax.nn.relu(x) + params["c"]
    return x


def chain_300(params, x):
    """The issue's "300-op chain": 150 steps of two ops."""
    return chain(params, x, steps=150)


def chain_args():
    return {"c": jnp.float32(1.0)}, _key_normal(6, (4,))


def benchmark_scan_rnn(params, xs):
    def cell(h, x):
        return jnp.tanh(h @ params["wh"] + x @ params["wx"]), None

    return lax.scan(cell, jnp.zeros((4, 32)), xs)[0]


def benchmark_scan_args():
    return {"wh": _key_normal(7, (32, 32)) * 0.1, "wx": _key_normal(8, (16, 32))}, _key_normal(9, (16, 4, 16))
