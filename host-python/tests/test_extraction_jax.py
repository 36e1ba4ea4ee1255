"""tl.extract_dataset on a JAX function: the selected op's values over every row equal the
function's own intermediate computed directly, and convert back to JAX arrays."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file

import torchlens as tl

pytestmark = pytest.mark.jax

W = jax.random.normal(jax.random.PRNGKey(0), (12, 5))


def mlp(x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ W).sum(-1)


def test_a_jax_function_extracted_like_a_torch_model(tmp_path):
    x = jax.random.normal(jax.random.PRNGKey(1), (50, 12))
    ex = tl.extract_dataset(mlp, x, save=tl.func("tanh"), out=str(tmp_path / "act"), batch_size=16)
    assert ex.backend == "jax" and len(ex) == 50
    assert [shard["rows"] for shard in ex.index["shards"]] == [16, 16, 16, 2]
    (label,) = ex.labels
    assert label.startswith("tanh_")
    expected = np.concatenate([np.asarray(jnp.tanh(x[s : s + 16] @ W)) for s in range(0, 50, 16)])
    assert np.array_equal(ex[label].numpy(), expected)
    assert np.array_equal(ex[label][10:20], expected[10:20])
    value = ex[label].to_backend()
    assert isinstance(value, jax.Array) and value.dtype == jnp.float32
    assert np.array_equal(np.asarray(value), expected)
    first = load_file(str(tmp_path / "act" / ex.index["shards"][0]["file"]))
    assert np.array_equal(first[label], expected[:16])
    assert ex.index["job"]["model"] == f"function {__name__}.mlp"


def test_numpy_rows_with_backend_jax_and_a_resume(tmp_path):
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (40, 12)))
    out = str(tmp_path / "act")
    batches = [x[s : s + 8] for s in range(0, 40, 8)]
    tl.extract_dataset(mlp, batches, save=tl.func("tanh"), out=out, batch_size=8, backend="jax")
    again = tl.extract_dataset(mlp, x, save=tl.func("tanh"), out=out, batch_size=8, backend="jax")
    (label,) = again.labels
    assert np.array_equal(again[label].numpy(), np.asarray(jnp.tanh(x @ W)))
