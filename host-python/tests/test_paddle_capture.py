"""The Paddle backend on real Paddle models: the battery traces and validates, values equal an
independent recomputation, the layer tree becomes the module hierarchy, constants and buffers
are leaves, tampering fails validation, selective save and .tlspec round trips, routing, and the
pinned op inventory."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
import paddle.nn.functional as F  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.paddle import Mlp, Shared, WithConstant, battery  # noqa: E402
from torchlens.backends.paddle import inventory  # noqa: E402
from torchlens.errors import PayloadModifiedError  # noqa: E402

pytestmark = pytest.mark.paddle

BATTERY = battery()


def _np(value):
    return np.asarray(value.numpy())


@pytest.mark.parametrize("name, model, x", BATTERY, ids=[case[0] for case in BATTERY])
def test_each_battery_model_traces_validates_and_matches_a_plain_call(name, model, x):
    trace = tl.trace(model, x, backend="paddle")
    assert trace.backend == "paddle" and trace.capture_verified
    assert trace.options.module_identity_mode == "object_module"
    assert trace.validate_forward_pass() is True
    with paddle.no_grad():
        plain = model(x)
    plain = plain if isinstance(plain, (list, tuple)) else [plain]
    for op, value in zip(trace.outputs, plain):
        np.testing.assert_allclose(_np(op.out), _np(value), rtol=1e-5, atol=1e-6)


def test_each_op_value_equals_an_independent_recomputation():
    model, x = BATTERY[0][1], BATTERY[0][2]
    trace = tl.trace(model, x, backend="paddle")
    assert [op.func_name for op in trace.ops] == ["input", "linear", "relu", "linear", "tanh", "output"]
    hidden = x.numpy() @ model.fc1.weight.numpy() + model.fc1.bias.numpy()
    np.testing.assert_allclose(_np(trace.ops[1].out), hidden, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(trace.ops[2].out), np.maximum(hidden, 0), rtol=1e-5, atol=1e-6)
    logits = np.maximum(hidden, 0) @ model.fc2.weight.numpy() + model.fc2.bias.numpy()
    np.testing.assert_allclose(_np(trace.ops[4].out), np.tanh(logits), rtol=1e-5, atol=1e-6)
    assert [parent.label for parent in trace.ops[2].parents] == [trace.ops[1].label]


def test_the_layer_tree_is_the_module_hierarchy():
    trace = tl.trace(Mlp(), paddle.ones([1, 6]), backend="paddle")
    assert {"fc1", "fc2"} <= set(trace.modules)
    assert trace.modules["fc1"].params == ["fc1.weight", "fc1.bias"]
    linear = [op for op in trace.ops if op.func_name == "linear"]
    assert [op.module for op in linear] == ["fc1:1", "fc2:1"]


def test_a_shared_sublayer_called_twice_is_one_module_with_two_passes():
    trace = tl.trace(Shared(), paddle.ones([1, 6]), backend="paddle")
    linear = [op for op in trace.ops if op.func_name == "linear"]
    assert [op.module for op in linear] == ["block:1", "block:2"]
    assert len(trace.modules["block"].params) == 2


def test_a_raw_callable_uses_function_root_and_routes_without_backend():
    def fn(a, b):
        return F.relu(a @ b) + 1.0

    a, b = paddle.ones([2, 3]), paddle.full([3, 2], -0.5)
    trace = tl.trace(fn, (a, b))
    assert trace.backend == "paddle"
    assert trace.options.module_identity_mode == "function_root"
    assert [op.func_name for op in trace.ops if op.kind == "compute"] == ["__matmul__", "relu", "__add__"]
    assert [op.op_type for op in trace.ops if op.kind == "compute"] == ["matmul", "relu", "add"]
    assert [op.label for op in trace.select(tl.func("add"))] == ["add_1_5"]
    assert trace.validate_forward_pass() is True
    assert tl.backends.resolve(Mlp(), paddle.ones([1, 6]), None).name == "paddle"


def test_a_constant_from_outside_the_forward_is_a_parentless_saved_leaf():
    constant = paddle.to_tensor(np.linspace(-1, 1, 6).astype("float32"))
    trace = tl.trace(WithConstant(constant), paddle.ones([2, 6]), backend="paddle", save=tl.func("linear"))
    (leaf,) = [op for op in trace.ops if op.kind == "constant"]
    assert leaf.parents == [] and leaf.saved
    np.testing.assert_array_equal(_np(leaf.out), constant.numpy())
    (mul,) = [op for op in trace.ops if op.op_type == "mul"]
    assert leaf.label in [parent.label for parent in mul.parents]
    assert trace.validate_forward_pass() is True


def test_a_tensor_attribute_of_a_layer_is_a_buffer():
    layer = Mlp()
    layer.register_buffer("offset", paddle.full([3], 0.25))

    def forward(x):
        return layer.fc2(F.relu(layer.fc1(x))) + layer.offset

    layer.forward = forward
    trace = tl.trace(layer, paddle.ones([1, 6]), backend="paddle")
    (buffer,) = [op for op in trace.ops if op.kind == "buffer"]
    assert buffer.saved and trace.validate_forward_pass() is True


def test_eval_mode_composites_are_coarse_nodes():
    ops = {name: tl.trace(model, x, backend="paddle") for name, model, x in BATTERY[1:3]}
    assert [op.func_name for op in ops["cnn"].ops].count("batch_norm") == 1
    lstm = [op for op in ops["lstm"].ops if op.func_name == "rnn"]
    # the sequence output and the final hidden and cell states, one kernel
    assert [tuple(op.shape) for op in lstm] == [(3, 2, 5), (1, 2, 5), (1, 2, 5)]


def test_an_op_returning_its_input_object_is_an_alias_not_a_new_op():
    def fn(x):
        y = F.relu(x)
        return y.contiguous() * 2.0  # a contiguous tensor's contiguous() is the tensor itself

    trace = tl.trace(fn, paddle.ones([2, 2]), backend="paddle")
    assert [op.op_type for op in trace.ops if op.kind == "compute"] == ["relu", "mul"]
    assert trace.provenance.paddle_aliases == "1"
    assert trace.validate_forward_pass() is True
    outside = paddle.ones([2, 2])
    constant = tl.trace(lambda x: x * outside.contiguous(), paddle.ones([2, 2]), backend="paddle")
    assert [op.kind for op in constant.ops].count("constant") == 1
    assert not hasattr(outside, "_torchlens_id")


def test_changing_a_saved_value_after_the_capture_fails_validation_and_names_that_op():
    model, x = BATTERY[0][1], BATTERY[0][2]
    trace = tl.trace(model, x, backend="paddle")
    relu = trace.ops[2]
    relu.out.set_value(relu.out.numpy() + 1.0)  # a write into the model's own tensor
    status = trace.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == relu.label
    assert not trace.validate_forward_pass()


def test_a_payload_written_in_place_after_the_capture_is_refused():
    model, x = BATTERY[0][1], BATTERY[0][2]
    trace = tl.trace(model, x, backend="paddle")
    relu = trace.ops[2]
    relu.out.add_(paddle.ones_like(relu.out))  # bumps the tensor's inplace version
    with pytest.raises(PayloadModifiedError):
        _ = trace[relu.label].out
    assert trace.validation_replay_status.state == "failed"


def test_a_static_save_keeps_the_matched_ops_and_still_validates():
    name, model, x = BATTERY[2]
    full = tl.trace(model, x, backend="paddle")
    narrow = tl.trace(model, x, backend="paddle", save=tl.func("rnn"))
    assert {op.label for op in narrow.saved_ops} == {op.label for op in full.ops if op.func_name == "rnn"}
    assert narrow.labels == full.labels
    assert narrow.validate_forward_pass() is True
    by_module = tl.trace(model, x, backend="paddle", save=tl.module("head"))
    assert [op.func_name for op in by_module.saved_ops] == ["linear"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_a_tlspec_round_trip_loads_paddle_tensors(tmp_path, dtype):
    def fn(x):
        # (Paddle's CPU kernels do little in bfloat16: the cast is the last op.)
        return (x * 2 + paddle.ones([3], dtype="float32")).astype(dtype)

    x = paddle.to_tensor([1.5, -2.0, 3.25], dtype="float32")
    trace = tl.trace(fn, x, backend="paddle")
    path = str(tmp_path / "trace.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert loaded.backend == "paddle" and loaded.labels == trace.labels
    out = loaded.outputs[0].out
    assert isinstance(out, paddle.Tensor) and str(out.dtype) == f"paddle.{dtype}"
    for op in trace.ops:
        if op.saved:
            np.testing.assert_array_equal(
                np.asarray(loaded[op.label].out.astype("float64").numpy()),
                np.asarray(op.out.astype("float64").numpy()),
            )
    assert loaded.validation_replay_status.state == "unavailable"
    assert loaded.validation_replay_status.reason == "loaded_trace_runtime_capture_stripped"


def test_the_op_inventory_matches_the_shipped_snapshot():
    snapshot = inventory.snapshot()
    assert snapshot["paddle"] == paddle.__version__, "rewrite inventory.json for this Paddle"
    live = inventory.live()
    for group, names in live.items():
        assert names == snapshot[group], f"the {group} surface changed: review and rewrite inventory.json"
    assert "relu" in live["c_ops"] and "add_" in live["c_ops_in_place"] and "uniform" in live["c_ops_rng"]


def test_nothing_stays_installed_after_a_capture():
    from paddle import _C_ops

    before = {name: id(getattr(_C_ops, name)) for name in dir(_C_ops)}
    call = paddle.nn.Layer.__call__
    model, x = BATTERY[0][1], BATTERY[0][2]
    tl.trace(model, x, backend="paddle")
    assert {name: id(getattr(_C_ops, name)) for name in dir(_C_ops)} == before
    assert paddle.nn.Layer.__call__ is call and sys.modules["paddle.tensor.linalg"].matmul is _C_ops.matmul
    assert not hasattr(x, "_torchlens_id") and not any(
        hasattr(p, "_torchlens_id") for p in model.parameters()
    )


def test_routing_never_imports_paddle_and_refuses_after_tensorflow():
    # A fresh interpreter where TensorFlow is loaded and Paddle is not: routing does not import
    # Paddle, and pinning the backend refuses with a typed error naming the order that works.
    # (A stand-in module occupies sys.modules["tensorflow"]: TensorFlow itself is not installed
    # here, and importing Paddle after it is exactly the crash this guards against.)
    script = """
import sys, types
sys.modules["tensorflow"] = types.ModuleType("tensorflow")
import torchlens as tl
from torchlens.errors import BackendUnsupportedError
try:
    tl.backends.resolve(lambda x: x, 1.0, None)
except BackendUnsupportedError as error:
    assert error.code == "backend_undetected", error.code
try:
    tl.trace(lambda x: x, 1.0, backend="paddle")
except BackendUnsupportedError as error:
    assert error.code == "paddle_import_order" and "import paddle before tensorflow" in error.remedy
else:
    raise AssertionError("no refusal")
try:
    tl.backends.paddle.GradOptions
except BackendUnsupportedError as error:
    assert error.code == "paddle_import_order"
else:
    raise AssertionError("no refusal")
assert "paddle" not in sys.modules
print("ok")
"""
    env = dict(os.environ)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


# A Trace holds reference cycles (trace <-> ops) and its native object is thread-bound (pyo3
# unsendable): the collector may free a worker's trace on another thread, which pyo3 reports as
# an unraisable RuntimeError. That is a property of the host's Trace, not of this capture.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_captures_on_two_threads_each_record_their_own_model():
    import threading

    results = {}

    def run(name, model, x):
        results[name] = [tl.trace(model, x, backend="paddle").labels for _ in range(3)]

    threads = [threading.Thread(target=run, args=case) for case in BATTERY[:2]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, model, x in BATTERY[:2]:
        expected = tl.trace(model, x, backend="paddle").labels
        assert results[name] == [expected] * 3
