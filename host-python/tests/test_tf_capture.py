"""The TensorFlow backend on real TensorFlow and Keras models: the battery traces, validates and
matches a plain call, op values equal Keras sub-models or a manual recomputation, the layer tree
becomes the module hierarchy (shared layers with all their addresses), constants are leaves,
selective save, .tlspec round trips (bfloat16 included), routing, and TensorFlow next to the
other frameworks in one process.

TensorFlow is imported inside the fixtures, never at collection: the PaddlePaddle suite must
import Paddle first (Paddle crashes when first imported after TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest

import torchlens as tl

pytestmark = pytest.mark.tf

BATTERY = ["mlp", "cnn", "rnn", "functional_skip", "shared", "attention", "module", "closure"]


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def models(tf):
    from conformance.models import tf as tf_models

    return tf_models


def _np(value):
    return np.asarray(value.numpy())


@pytest.mark.parametrize("name", BATTERY)
def test_each_battery_model_traces_validates_and_matches_a_plain_call(models, name):
    model, x = getattr(models, name)()
    trace = tl.trace(model, x)  # backend=None routes TensorFlow models and functions to tf
    assert trace.backend == "tf" and trace.capture_verified
    expected_mode = "function_root" if name == "closure" else "object_module"
    assert trace.options.module_identity_mode == expected_mode
    status = trace.validation_replay_status
    assert status.state == "passed", [d for d in status.decisions if d[1] not in ("passed", "leaf")][:5]
    assert trace.validate_forward_pass() is True
    plain = model(x)
    np.testing.assert_allclose(_np(trace.outputs[0].out), _np(plain), rtol=1e-5, atol=1e-6)


def test_mlp_values_equal_a_manual_recomputation(models):
    model, x = models.mlp()
    trace = tl.trace(model, x, backend="tf")
    compute = [op for op in trace.ops if op.kind == "compute"]
    assert [op.func_name for op in compute] == ["matmul", "bias_add", "relu", "matmul", "bias_add"]
    kernel, bias, kernel2, bias2 = [w.numpy() for w in model.weights]
    hidden = _np(x) @ kernel + bias
    np.testing.assert_allclose(_np(compute[1].out), hidden, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(compute[2].out), np.maximum(hidden, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        _np(compute[4].out), np.maximum(hidden, 0) @ kernel2 + bias2, rtol=1e-5, atol=1e-5
    )
    assert [parent.label for parent in compute[2].parents] == [compute[1].label]
    assert set(trace.params) == {"layers.0.kernel", "layers.0.bias", "layers.1.kernel", "layers.1.bias"}


def test_saved_values_equal_keras_sub_models(tf, models):
    import keras

    model, x = models.functional_skip()
    trace = tl.trace(model, x, backend="tf")
    inner = keras.Model(model.inputs, model.get_layer("inner").output)
    tanh = [op for op in trace.ops if op.func_name == "tanh"]
    assert [op.module for op in tanh] == ["layers.1:1"]
    np.testing.assert_allclose(_np(tanh[0].out), _np(inner(x)), rtol=1e-5, atol=1e-6)
    skip = keras.Model(model.inputs, model.get_layer("skip").output)
    added = [op for op in trace.ops if op.func_name == "add"]
    np.testing.assert_allclose(_np(added[0].out), _np(skip(x)), rtol=1e-5, atol=1e-6)

    cnn, image = models.cnn()
    trace = tl.trace(cnn, image, backend="tf")
    upto_relu = keras.Model(cnn.inputs, cnn.layers[2].output)
    relu = [op for op in trace.ops if op.func_name == "relu"]
    np.testing.assert_allclose(_np(relu[0].out), _np(upto_relu(image)), rtol=1e-5, atol=1e-5)
    pool = [op for op in trace.ops if op.func_name == "max_pool"]
    assert [op.module for op in pool] == ["layers.3:1"]


def test_a_shared_layer_is_one_module_with_all_its_addresses_and_two_passes(models):
    model, x = models.shared()
    trace = tl.trace(model, x, backend="tf")
    matmul = [op for op in trace.ops if op.func_name == "matmul"]
    assert [op.module for op in matmul] == ["shared:1", "shared:2", "head:1"]
    assert trace.modules["shared"].params == ["shared.kernel", "shared.bias"]
    assert "alias" in trace.modules["shared"].all_addresses
    assert len(trace.params) == 4


def test_a_tf_module_tree_attributes_its_variables_and_calls(models):
    model, x = models.module()
    trace = tl.trace(model, x)
    assert trace.backend == "tf"
    assert set(trace.params) == {"first.w", "first.b", "second.w", "second.b"}
    relu = [op for op in trace.ops if op.func_name == "relu"]
    assert [op.module for op in relu] == ["first:1", "second:1"]
    first = model.first
    np.testing.assert_allclose(
        _np(relu[0].out), np.maximum(_np(x) @ first.w.numpy() + first.b.numpy(), 0), rtol=1e-5
    )


def test_a_closure_constant_is_a_parentless_constant_with_its_payload(tf, models):
    fn, x = models.closure()
    trace = tl.trace(fn, x, backend="tf")
    mul = [op for op in trace.ops if op.func_name == "mul"][0]
    constant = [parent for parent in mul.parents if parent.func_name == "constant"]
    assert len(constant) == 1 and not constant[0].parents
    np.testing.assert_array_equal(_np(constant[0].out), np.arange(4, dtype="float32"))
    assert trace.options.module_identity_mode == "function_root"


def test_a_static_save_keeps_the_matched_ops_and_still_validates(models):
    model, x = models.mlp()
    full = tl.trace(model, x, backend="tf")
    narrow = tl.trace(model, x, backend="tf", save=tl.func("relu"))
    assert narrow.labels == full.labels
    assert {op.label for op in narrow.saved_ops} == {op.label for op in full.ops if op.func_name == "relu"}
    by_module = tl.trace(model, x, backend="tf", save=tl.module("layers.1"))
    assert [op.func_name for op in by_module.saved_ops] == ["bias_add"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "bool"])
def test_a_tlspec_round_trip_loads_tf_tensors(tf, tmp_path, dtype):
    def fn(x):
        return tf.cast(x * 2.0 + tf.ones((3,)), dtype)

    x = tf.constant([1.5, -2.0, 3.25])
    trace = tl.trace(fn, x, backend="tf")
    path = str(tmp_path / "trace.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert loaded.backend == "tf" and loaded.labels == trace.labels
    out = loaded.outputs[0].out
    assert isinstance(out, tf.Tensor) and out.dtype.name == dtype
    for op in trace.ops:
        if op.saved:
            np.testing.assert_array_equal(
                tf.cast(loaded[op.label].out, tf.float64).numpy(), tf.cast(op.out, tf.float64).numpy()
            )
    assert loaded.validation_replay_status.state == "unavailable"


def test_a_string_payload_refuses_to_save(tf, tmp_path):
    def fn(x):
        return tf.strings.as_string(x)

    trace = tl.trace(fn, tf.constant([1.0, 2.0]), backend="tf")
    path = tmp_path / "trace.tlspec"
    with pytest.raises(tl.errors.BackendUnsupportedError) as caught:
        trace.save(str(path))
    assert caught.value.code == "tf_payload_unencodable" and caught.value.remedy
    assert not path.exists()  # refused before anything was written


def test_nan_finder_and_dead_units_work(tf):
    def fn(x):
        return tf.math.log(tf.nn.relu(x))

    trace = tl.trace(fn, tf.constant([[1.0, -1.0, 2.0]]), backend="tf")
    finding = tl.debug.find_nan(trace)
    assert finding.label == [op.label for op in trace.ops if op.func_name == "log"][0]
    dead = {row.label: row for row in tl.debug.dead_units(trace, dim=1)}
    relu = [op.label for op in trace.ops if op.func_name == "relu"][0]
    assert dead[relu].dead_count == 1 and dead[relu].total_units == 3


def _other_frameworks():
    """``(backend, model, input)`` of every other installed framework, each routed by
    ``backend=None``. Paddle only when it is already imported: importing it after TensorFlow
    crashes (owned by the Paddle issue)."""
    import importlib.util
    import sys

    found = []
    if importlib.util.find_spec("torch") is not None:
        import torch

        found.append(("torch", torch.nn.Linear(3, 2), torch.ones(1, 3)))
    if importlib.util.find_spec("jax") is not None:
        import jax.numpy as jnp

        found.append(("jax", lambda v: jnp.tanh(v) * 2.0, jnp.ones((3,))))
    if importlib.util.find_spec("mlx") is not None:
        import mlx.core as mx

        found.append(("mlx", lambda v: mx.tanh(v) * 2.0, mx.ones((3,))))
    if importlib.util.find_spec("tinygrad") is not None:
        from tinygrad import Tensor

        found.append(("tinygrad", lambda v: (v * 2.0).relu(), Tensor.ones(3)))
    if "paddle" in sys.modules:
        paddle = sys.modules["paddle"]
        found.append(("paddle", paddle.nn.Linear(3, 2), paddle.ones((1, 3))))
    return found


@pytest.mark.both_hosts  # its torch capture takes the native objects on the native host
def test_tensorflow_and_every_other_installed_framework_trace_in_one_process(tf, models):
    model, x = models.mlp()
    first = tl.trace(model, x)
    for backend, other, value in _other_frameworks():  # none on the pinned leg (TF alone)
        trace = tl.trace(other, value)
        assert trace.backend == backend and trace.validate_forward_pass() is True, backend
        assert tl.backends.resolve(model, x, None).name == "tf"
    again = tl.trace(model, x)
    assert first.backend == again.backend == "tf" and again.validate_forward_pass() is True
    np.testing.assert_array_equal(again.outputs[0].out.numpy(), first.outputs[0].out.numpy())


def test_routing_reads_sys_modules_and_never_imports_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys, numpy, torchlens as tl\n"
        "try:\n"
        "    tl.backends.resolve(lambda x: x, numpy.ones(2), None)\n"
        "except Exception:\n"
        "    pass\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_tf_function_root_is_imported_from_its_graph(tf):
    weights = tf.constant(np.arange(6, dtype="float32").reshape(3, 2) / 4.0)

    @tf.function
    def fn(x):
        return tf.nn.relu(tf.matmul(x, weights)) + tf.reduce_sum(x)

    x = tf.constant(np.arange(6, dtype="float32").reshape(2, 3) - 2.0)
    trace = tl.trace(fn, x)
    assert trace.backend == "tf" and trace.options.module_identity_mode == "function_root"
    assert trace.options.recurrence_detection is False
    assert trace.provenance.tf_capture == "funcgraph"
    assert int(trace.provenance.tf_replayable_ops) == 5  # matmul, relu, sum, add, identity
    relu = [op for op in trace.ops if op.func_name == "relu"][0]
    np.testing.assert_allclose(_np(relu.out), np.maximum(_np(x) @ _np(weights), 0), rtol=1e-6)
    np.testing.assert_allclose(_np(trace.outputs[0].out), _np(fn(x)), rtol=1e-6)
    assert trace.validation_replay_status.state == "passed"


def test_a_saved_model_signature_is_imported_with_its_variables_read(tf, tmp_path):
    class Scorer(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.arange(6, dtype="float32").reshape(3, 2) / 5.0)

        @tf.function(input_signature=[tf.TensorSpec((None, 3), tf.float32)])
        def __call__(self, x):
            return tf.nn.tanh(tf.matmul(x, self.w))

    scorer = Scorer()
    tf.saved_model.save(scorer, str(tmp_path))
    signature = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    x = tf.constant(np.arange(6, dtype="float32").reshape(2, 3) - 2.0)
    trace = tl.trace(signature, x, backend="tf")
    tanh = [op for op in trace.ops if op.func_name == "tanh"][0]
    np.testing.assert_allclose(_np(tanh.out), np.tanh(_np(x) @ scorer.w.numpy()), rtol=1e-6)
    assert trace.validation_replay_status.state == "passed"
