"""Replay validation of TensorFlow traces reports what it checked: the replayed, pure-unverified
and effect-region counts; an op reading a value no recorded op produced (an unresolved
producer) is named and keeps the status from passing; an ``If`` in a graph-only entry is walked
along the branch it takes, while a ``While`` loop and the loop of ``Model.predict`` are effect
regions with their own reasons. Unverified is never a
pass.

TensorFlow is imported inside the fixtures, never at collection (see test_tf_capture.py)."""

from __future__ import annotations

import numpy as np
import pytest
import test_tf_capture

import torchlens as tl

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
