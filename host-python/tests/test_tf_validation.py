"""Replay validation of TensorFlow traces reports what it checked: the replayed, pure-unverified
and effect-region counts; an op reading a value no recorded op produced (an unresolved
producer) is named and keeps the status from passing; an ``If`` in a graph-only entry is walked
along the branch it takes, while a ``While`` loop and the loop of ``Model.predict`` are effect
regions with their own reasons. Unverified is never a
pass.

TensorFlow is imported inside the fixtures, never at collection (see test_tf_capture.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import test_tf_capture

import torchlens as tl
from torchlens.adapter_kit.op_names import snake_case

pytestmark = pytest.mark.tf

#: The TensorFlow fixtures of the capture tests (TensorFlow imported when first used).
tf = test_tf_capture.tf
models = test_tf_capture.models


def _reasons(status, outcome="not_replayable"):
    return {reason for _label, kind, reason in status.decisions if kind == outcome}


def test_a_fully_replayed_trace_counts_every_compute_op_as_replayed(models):
    model, x = models.mlp()
    trace = tl.trace(model, x, backend="tf")
    status = trace.validation_replay_status
    compute = [op for op in trace.ops if op.kind == "compute"]
    assert status.state == "passed"
    assert status.counts() == {
        "replayed": len(compute),
        "failed": 0,
        "pure_unverified": 0,
        "effect_regions": 0,
    }
    assert status.unresolved_producers == []


def test_a_nested_function_call_is_an_effect_region_and_not_a_pass(tf):
    @tf.function
    def inner(x):
        return tf.nn.relu(x) * 3.0

    def outer(x):
        return inner(x * 2.0) + 1.0

    trace = tl.trace(outer, tf.constant([[-1.0, 2.0]]), backend="tf")
    status = trace.validation_replay_status
    assert status.state == "unverified" and status.reason == "opaque_region"
    assert status.effect_regions == 1 and status.pure_unverified == 0
    assert status.replayed == 2  # the multiply before the call and the add after it
    with pytest.raises(TypeError):
        bool(status)


def test_an_op_with_no_perturbable_parent_is_pure_unverified(tf):
    def lengths(x):
        return tf.strings.length(tf.strings.as_string(x))

    trace = tl.trace(lengths, tf.constant([1.0, 22.5]), backend="tf")
    status = trace.validation_replay_status
    assert status.state == "unverified"
    assert status.pure_unverified >= 1 and status.effect_regions == 0
    assert "no_perturbable_parent" in _reasons(status)


def test_a_value_that_left_tensorflow_is_an_unresolved_producer(tf):
    def escapes(x):
        doubled = tf.constant(x.numpy() * 2.0)  # the edge from x is invisible to the callback
        return tf.nn.relu(doubled + x)

    x = tf.constant([[1.0, -2.0, 3.0]])
    trace = tl.trace(escapes, x, backend="tf")
    assert trace.provenance.tf_unresolved_producers == "1"
    status = trace.validation_replay_status
    assert status.state == "unverified" and status.reason == "unresolved_producer"
    constant = [op for op in trace.ops if op.kind == "constant"]
    add = [op for op in trace.ops if op.func_name == "add"]
    assert len(constant) == 1 and len(add) == 1
    assert status.unresolved_producers == [constant[0].label, add[0].label]
    assert "unresolved_producers" in repr(status).replace(" ", "_")
    # The relu downstream still replays: only the unresolved edge is unverified.
    assert status.replayed == 1 and status.pure_unverified == 2


def test_a_graph_op_reading_a_tensor_no_walked_op_produced_is_an_unresolved_producer(tf):
    @tf.function
    def entry(x):
        return tf.nn.relu(x * 2.0)

    concrete = entry.get_concrete_function(tf.TensorSpec((2,), tf.float32))
    # The graph edited after it was traced: its output now reads a placeholder that is neither an
    # input nor a capture (the function that runs is the one traced before the edit).
    graph = concrete.graph
    with graph.as_default():
        stray = tf.compat.v1.placeholder(tf.float32, (2,), name="stray")
        edited = graph.outputs[0] + stray
    graph.structured_outputs = edited
    graph.outputs = [edited]
    trace = tl.trace(concrete, tf.constant([1.0, -2.0]), backend="tf")
    assert trace.provenance.tf_capture == "funcgraph"
    status = trace.validation_replay_status
    assert status.state == "unverified" and status.reason == "unresolved_producer"
    edited_op = [op for op in trace.ops if op.attributes.get("tf_op_type") == "AddV2"]
    assert len(edited_op) == 1 and status.unresolved_producers == [edited_op[0].label]
    # Everything upstream of the edit still replays.
    assert status.replayed == 3


def test_a_closure_constant_made_before_the_call_is_not_unresolved(models):
    model, x = models.closure()
    status = tl.trace(model, x, backend="tf").validation_replay_status
    assert status.state == "passed" and status.unresolved_producers == []


def test_a_while_loop_in_a_graph_only_entry_is_a_control_flow_region(tf):
    @tf.function
    def loop(x):
        total = tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc * 2.0), (0, x))[1]
        return tf.nn.relu(total) + 1.0

    x = tf.constant([[-1.0, 2.0]])
    trace = tl.trace(loop, x, backend="tf")
    assert trace.provenance.tf_capture == "funcgraph"
    regions = [op for op in trace.ops if op.attributes.get("tf_op_type") in ("While", "StatelessWhile")]
    assert regions  # one record per loop output
    np.testing.assert_allclose(trace.outputs[0].out.numpy(), loop(x).numpy())
    status = trace.validation_replay_status
    assert status.state == "unverified"
    by_label = {label: (kind, reason) for label, kind, reason in status.decisions}
    assert all(by_label[op.label] == ("not_replayable", "control_flow_region") for op in regions)
    assert status.effect_regions >= len(regions)


@pytest.mark.parametrize("sign, taken, skipped", [(1.0, "relu", "tanh"), (-1.0, "tanh", "relu")])
def test_an_if_in_a_graph_only_entry_is_walked_along_the_branch_it_takes(tf, sign, taken, skipped):
    @tf.function
    def branchy(x):
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.nn.relu(x) * 3.0, lambda: tf.tanh(x) - 1.0) + 1.0

    x = tf.constant([[1.0, -2.0, 4.0]]) * sign
    trace = tl.trace(branchy, x, backend="tf")
    names = [op.func_name for op in trace.ops]
    assert taken in names and skipped not in names
    assert not [op for op in trace.ops if op.attributes.get("tf_op_type") in ("If", "StatelessIf")]
    np.testing.assert_allclose(trace.outputs[0].out.numpy(), branchy(x).numpy())
    status = trace.validation_replay_status
    assert status.state == "passed" and status.effect_regions == 0


def test_predict_is_imported_with_its_loop_as_an_effect_region(tf, models):
    model, x = models.mlp()
    trace = tl.trace(model.predict, x, {"verbose": 0}, backend="tf")
    assert trace.provenance.tf_capture == "funcgraph"
    assert trace.options.module_identity_mode == "function_root"
    loop = [op for op in trace.ops if op.func_name == "predict_loop"]
    assert len(loop) == 1 and trace.outputs[0].parents[0].label == loop[0].label
    np.testing.assert_allclose(
        trace.outputs[0].out.numpy(), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6
    )
    status = trace.validation_replay_status
    assert status.state == "unverified" and status.reason == "predict_loop_region"
    assert status.effect_regions == 1 and status.pure_unverified == 0
    assert status.replayed >= 3  # the forward's matmuls, bias adds and relu replay


_UNET_WITH_CONV2D_TRANSPOSE = """
import tensorflow as tf
import torchlens as tl

tf.keras.utils.set_random_seed(0)
inputs = tf.keras.Input((16, 16, 3))
down = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
pooled = tf.keras.layers.MaxPooling2D()(down)
middle = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(pooled)
up = tf.keras.layers.Conv2DTranspose(8, 2, strides=2, padding="same")(middle)
merged = tf.keras.layers.Concatenate()([up, down])
outputs = tf.keras.layers.Conv2D(1, 1, activation="sigmoid")(merged)
model = tf.keras.Model(inputs, outputs)
trace = tl.trace(model, tf.random.normal((1, 16, 16, 3)), backend="tf")
names = {op.func_name for op in trace.ops}
assert "conv2d_backprop_input" in names, sorted(names)
print("validated:", trace.validate_forward_pass(), trace.validation_replay_status.state)
"""


def test_a_keras_unet_with_conv2d_transpose_validates_without_ending_the_process():
    # Replay used to perturb Conv2DBackpropInput's int32 input_sizes; TensorFlow's oneDNN kernel
    # (on by default) then aborted the interpreter. A child process keeps such an abort from
    # taking the test run down with it; TF_ENABLE_ONEDNN_OPTS is left unset (the default).
    environment = {key: value for key, value in os.environ.items() if key != "TF_ENABLE_ONEDNN_OPTS"}
    environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    child = subprocess.run(
        [sys.executable, "-c", _UNET_WITH_CONV2D_TRANSPOSE],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert "validated: True passed" in child.stdout, child.stdout + child.stderr[-3000:]


def test_tensorflow_op_types_take_the_names_of_their_generated_functions(tf):
    # One normaliser for every backend: Conv2DBackpropInput is conv2d_backprop_input (a plain
    # regex made it conv2_dbackprop_input), as TensorFlow's generated gen_*_ops functions say.
    # TensorFlow is imported inside the fixtures, never at collection (see the module's doc).
    from tensorflow.python.ops import gen_array_ops, gen_image_ops, gen_math_ops, gen_nn_ops

    generated = set()
    for module in (gen_array_ops, gen_image_ops, gen_math_ops, gen_nn_ops):
        generated |= {name for name in dir(module) if not name.startswith("_")}
    op_types = [name for name in dir(tf.raw_ops) if not name.startswith("_")]
    named = [op_type for op_type in op_types if snake_case(op_type) in generated]
    assert len(named) > 400
    assert (
        snake_case("Conv2DBackpropInput") == "conv2d_backprop_input" and "conv2d_backprop_input" in generated
    )
    for op_type in op_types:
        lower = op_type.lower()
        matches = [name for name in generated if name.replace("_", "") == lower]
        if len(matches) == 1:
            assert snake_case(op_type) == matches[0], op_type
