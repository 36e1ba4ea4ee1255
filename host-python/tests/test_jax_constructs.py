"""Common JAX constructs inside a traced function: each captures, reproduces the function's
output, and passes replay validation (transforms inside the function are traced away by JAX;
library jits, custom_jvp rules and custom_linear_solve are inlined)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import torchlens as tl

pytestmark = pytest.mark.jax

X = jnp.linspace(-1, 1, 12).reshape(3, 4)
PARAMS = {"w": jnp.ones((4, 4)) * 0.1 + jnp.eye(4)}

CASES = {
    "python_number_output": lambda p, x: (jnp.sum(x), 3),
    "vmap_inside": lambda p, x: jax.vmap(lambda row: row @ p["w"])(x),
    "grad_inside": lambda p, x: jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(p["w"]),
    "fori_loop": lambda p, x: lax.fori_loop(0, 3, lambda i, v: v @ p["w"], x),
    "switch": lambda p, x: lax.switch(1, [jnp.sin, jnp.cos, jnp.tanh], x),
    "lax_map": lambda p, x: lax.map(lambda row: row * 2, x),
    "top_k": lambda p, x: lax.top_k(x, 2),
    "sort": lambda p, x: jnp.sort(x, axis=1),
    "linalg_inv": lambda p, x: jnp.linalg.inv(p["w"]),
    "linalg_solve": lambda p, x: jnp.linalg.solve(p["w"], x.T),
    "logsumexp_softmax": lambda p, x: jax.nn.logsumexp(x, axis=1) + jax.nn.softmax(x).sum(),
    "jit_static_argnums": lambda p, x: jax.jit(lambda v, n: v * n, static_argnums=1)(x, 3),
    "cumsum": lambda p, x: jnp.cumsum(x, axis=0),
    "where_argmax": lambda p, x: jnp.where(x > 0, x, 0.0) + jnp.argmax(x),
    "einsum": lambda p, x: jnp.einsum("ij,jk->ik", x, p["w"]),
    "layer_norm": lambda p, x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
    "bernoulli_mask": lambda p, x: x * jax.random.bernoulli(jax.random.key(0), 0.5, x.shape),
    "checkpoint": lambda p, x: jax.checkpoint(lambda v: jnp.sin(v) @ p["w"])(x),
    "integer_ops": lambda p, x: (jnp.arange(4) * 2) % 3 + x.astype(jnp.int32),
    "scatter_updates": lambda p, x: x.at[0, 1].set(5.0).at[1].add(1.0).at[2].mul(2.0),
    "segment_sum": lambda p, x: jax.ops.segment_sum(x, jnp.array([0, 1, 0]), 2),
    "reduce_window": lambda p, x: lax.reduce_window(x, 1.0, lambda a, b: a * b, (1, 2), (1, 2), "VALID"),
    "associative_scan": lambda p, x: lax.associative_scan(jnp.add, x, axis=1),
    "one_hot": lambda p, x: jax.nn.one_hot(jnp.argmax(x, 1), 4) @ p["w"],
    "image_resize": lambda p, x: jax.image.resize(x, (6, 8), "linear"),
    "fft": lambda p, x: jnp.abs(jnp.fft.fft(x)),
    "interp": lambda p, x: jnp.interp(x, jnp.linspace(0, 1, 5), jnp.arange(5.0)),
    "eigh_cholesky_qr_svd": lambda p, x: (
        jnp.linalg.eigh(x @ x.T)[0],
        jnp.linalg.cholesky(x @ x.T + jnp.eye(3)),
        jnp.linalg.qr(x)[1],
        jnp.linalg.svd(x, compute_uv=False),
    ),
    "complex": lambda p, x: jnp.real(jnp.exp(1j * x)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_construct_captures_and_validates(name):
    fn = CASES[name]
    trace = tl.trace(fn, (PARAMS, X), backend="jax")
    status = trace.validation_replay_status
    assert status.state == "passed", (status, [d for d in status.decisions if d[1] != "passed"][:3])
    expected = jax.tree_util.tree_leaves(fn(PARAMS, X))
    assert len(trace.outputs) == len(expected)
    for op, value in zip(trace.outputs, expected):
        np.testing.assert_allclose(np.asarray(op.out), np.asarray(value), rtol=1e-5, atol=1e-6)


def test_linalg_solve_is_inlined_not_refused():
    trace = tl.trace(CASES["linalg_solve"], (PARAMS, X), backend="jax")
    assert "custom_linear_solve" not in [op.func_name for op in trace.ops]
    assert "lu" in [op.func_name for op in trace.ops]
