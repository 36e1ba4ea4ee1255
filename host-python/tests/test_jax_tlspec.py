""".tlspec files of JAX traces: payloads load back as jax.Array with their logical dtype
(bfloat16 included), typed PRNG keys come back as typed keys, sharded arrays keep their sharding
in the manifest's codec metadata and are resharded only on request, and a loaded trace reports
replay validation unavailable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torchlens as tl
from conformance.models.jax import mlp, mlp_args

pytestmark = pytest.mark.jax


def test_round_trip_loads_jax_arrays_equal_to_the_live_values(tmp_path):
    params, x = mlp_args()
    trace = tl.trace(mlp, (params, x), backend="jax")
    path = str(tmp_path / "mlp.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert loaded.backend == "jax"
    assert loaded.labels == trace.labels
    for live, back in zip(trace.ops, loaded.ops):
        if live.saved:
            assert isinstance(back.out, jax.Array)
            np.testing.assert_array_equal(np.asarray(back.out), np.asarray(live.out))
    status = loaded.validation_replay_status
    assert status.state == "unavailable"
    assert status.reason == "loaded_trace_runtime_capture_stripped"
    assert loaded.provenance.param_source == "pytree-derived"


def test_a_trace_with_a_region_round_trips(tmp_path):
    from conformance.models.jax import scan_rnn, scan_rnn_args
    from torchlens.options import CaptureOptions

    params, xs = scan_rnn_args(steps=4)
    trace = tl.trace(scan_rnn, (params, xs), backend="jax", capture=CaptureOptions(jax_control_flow="region"))
    path = str(tmp_path / "region.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    boundary = loaded.select(tl.func("scan"))[0]
    assert boundary.dtype == "region_token" and not boundary.saved
    for live, back in zip(trace.select(tl.func("region_output")), loaded.select(tl.func("region_output"))):
        np.testing.assert_array_equal(np.asarray(back.out), np.asarray(live.out))


def test_the_file_is_safetensors_readable(tmp_path):
    from safetensors.numpy import load_file

    params, x = mlp_args()
    path = str(tmp_path / "mlp.tlspec")
    tl.trace(mlp, (params, x), backend="jax").save(path)
    tensors = load_file(path)
    assert "input_1" in tensors
    np.testing.assert_array_equal(tensors["input_1"], np.asarray(x))


def test_bfloat16_keeps_its_logical_dtype(tmp_path):
    def fn(params, x):
        return jnp.tanh(x @ params["w"])

    params = {"w": jnp.linspace(-1, 1, 12, dtype=jnp.bfloat16).reshape(4, 3)}
    x = jnp.linspace(-2, 2, 8, dtype=jnp.bfloat16).reshape(2, 4)
    trace = tl.trace(fn, (params, x), backend="jax")
    assert trace.outputs[0].dtype == "bfloat16"
    assert trace.validate_forward_pass([]) is True
    path = str(tmp_path / "bf16.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    for live, back in zip(trace.saved_ops, loaded.saved_ops):
        assert back.out.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(back.out), np.asarray(live.out))


def test_typed_prng_keys_round_trip_as_typed_keys(tmp_path):
    def noisy(params, key, x):
        key, sub = jax.random.split(key)
        return x * params["s"] + jax.random.normal(sub, x.shape), key

    key = jax.random.key(7)
    params, x = {"s": jnp.float32(2.0)}, jnp.ones((3,))
    trace = tl.trace(noisy, (params, key, x), backend="jax")
    assert trace.validate_forward_pass([]) is True
    split = trace.select(tl.func("random_split"))[0]
    assert split.dtype == "uint32" and split.shape == (2, 2)
    assert split.attributes["jax_key_impl"] == "threefry2x32"
    np.testing.assert_allclose(trace.outputs[0].out, noisy(params, key, x)[0], rtol=1e-6)
    path = str(tmp_path / "keys.tlspec")
    trace.save(path)
    codec = json.loads(tl.load(path)._manifest["codec_metadata"])
    assert codec["jax_prng_keys"]["input_1"] == "threefry2x32"
    loaded = tl.load(path)
    back = loaded["input_1"].out
    assert jax.dtypes.issubdtype(back.dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(back), jax.random.key_data(key))
    np.testing.assert_array_equal(jax.random.normal(back, (2,)), jax.random.normal(key, (2,)))
    assert loaded.payload_load_status["input_1"] == "typed_key"


SHARDED = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import torchlens as tl
    from torchlens.backends.jax import JaxPayloadLoadHint
    from torchlens.tlspec_io import PayloadLoadHints

    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))
    sharding = NamedSharding(mesh, P("data", None))
    x = jax.device_put(jnp.arange(32.0).reshape(8, 4), sharding)
    params = {"w": jnp.ones((4, 3))}
    fn = lambda params, x: jnp.sin(x) @ params["w"]
    trace = tl.trace(fn, (params, x), backend="jax")
    assert trace.validate_forward_pass([]) is True
    path = sys.argv[1]
    trace.save(path)
    plain = tl.load(path)
    codec = json.loads(plain._manifest["codec_metadata"])
    named = codec["jax_sharding"]["input_1"]["jax_named_sharding"]
    assert codec["jax_sharding_version"] == 1
    assert named == {"axis_names": ["data", "model"], "mesh_shape": [2, 2], "partition_spec": ["data", None]}
    assert len(plain["input_1"].out.sharding.device_set) == 1
    np.testing.assert_array_equal(plain["input_1"].out, x)
    rebuilt = tl.load(path, payload_load_hints=PayloadLoadHints(
        jax=JaxPayloadLoadHint(reconstruct_sharding=True, platform="cpu")))
    value = rebuilt["input_1"].out
    assert value.sharding.spec == P("data", None) and len(value.sharding.device_set) == 4
    np.testing.assert_array_equal(value, x)
    assert rebuilt.payload_load_status["input_1"] == "sharded"
    assert tl.PayloadLoadHints is PayloadLoadHints
    hint = tl.backends.jax.JaxPayloadLoadHint(sharding=sharding)
    given = tl.load(path, payload_load_hints=tl.PayloadLoadHints(jax=hint))
    assert given["input_1"].out.sharding == sharding
    print("ok")
    """
)


def test_sharded_arrays_on_several_host_devices_round_trip(tmp_path):
    environment = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", SHARDED, str(tmp_path / "sharded.tlspec")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
