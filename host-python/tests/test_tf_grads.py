"""Derived gradients of the TensorFlow backend equal tf.GradientTape gradients: leaf gradients of
inputs and variables, and exact per-op records; no captured backward pass.

TensorFlow is imported inside the fixtures, never at collection (see test_tf_capture.py)."""

from __future__ import annotations

import numpy as np
import pytest

import torchlens as tl
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def models(tf):
    from conformance.models import tf as tf_models

    return tf_models


@pytest.mark.parametrize("name", ["mlp", "cnn", "functional_skip", "shared", "module"])
def test_leaf_gradients_equal_gradient_tape(tf, models, name):
    model, x = getattr(models, name)()
    options = tl.backends.tf.GradOptions(loss_fn=lambda output: tf.reduce_sum(output * output))
    trace = tl.trace(model, x, backend="tf", capture=CaptureOptions(grad_options=options))
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = model(x)
        loss = tf.reduce_sum(out * out)
    expected = tape.gradient(loss, [x] + list(variables))
    grads = trace.autograd.derived_grads
    np.testing.assert_allclose(grads["inputs.0"].numpy(), expected[0].numpy(), rtol=1e-4, atol=1e-5)
    assert len([key for key in grads if key.startswith("params.")]) == len(variables)
    by_handle = {
        id(v.value.handle if hasattr(v, "path") else v.handle): g for v, g in zip(variables, expected[1:])
    }
    runtime = trace._runtime
    for value_id, variable in runtime.params.items():
        if not variable.trainable:
            assert f"params.{runtime.param_addresses[value_id]}" not in grads
            continue
        key = f"params.{runtime.param_addresses[value_id]}"
        np.testing.assert_allclose(
            grads[key].numpy(), by_handle[id(variable.handle)].numpy(), rtol=1e-4, atol=1e-5
        )
    assert trace.autograd.has_backward_pass is False


def test_intermediate_gradients_are_exact_records(tf, models):
    model, x = models.mlp()
    options = tl.backends.tf.GradOptions(intermediate_grads=True)
    trace = tl.trace(model, x, backend="tf", capture=CaptureOptions(grad_options=options))
    relu = [op for op in trace.ops if op.func_name == "relu"][0]
    record = trace.autograd.intermediate_derived_grads[relu.label]
    assert record.status == "exact"
    kernel2 = model.layers[1].kernel.numpy()
    # d(sum(relu @ W2 + b2)) / d relu = row sums of W2, broadcast over the batch
    np.testing.assert_allclose(
        record.value.numpy(), np.broadcast_to(kernel2.sum(axis=1), relu.shape), rtol=1e-5
    )


def test_the_intermediate_cap_refuses(tf, models):
    model, x = models.mlp()
    options = tl.backends.tf.GradOptions(intermediate_grads=True, max_intermediate_grads=1)
    with pytest.raises(tl.errors.LimitExceededError):
        tl.trace(model, x, backend="tf", capture=CaptureOptions(grad_options=options))


def test_a_forward_that_changes_between_calls_refuses_derived_gradients(tf):
    state = {"calls": 0}

    def drifting(x):
        state["calls"] += 1
        return x * float(state["calls"])

    options = tl.backends.tf.GradOptions()
    with pytest.raises(tl.errors.CaptureError) as caught:
        tl.trace(drifting, tf.ones((2,)), backend="tf", capture=CaptureOptions(grad_options=options))
    assert caught.value.code == "derived_grad_replay_diverged" and caught.value.remedy


def test_a_graph_only_entry_refuses_grad_options_before_it_runs(tf):
    calls = []

    @tf.function
    def fn(x):
        calls.append(x)
        return x * 2.0

    with pytest.raises(tl.errors.BackendUnsupportedError) as caught:
        tl.trace(
            fn, tf.ones((2,)), backend="tf", capture=CaptureOptions(grad_options=tl.backends.tf.GradOptions())
        )
    assert caught.value.code == "tf_graph_only_grad" and caught.value.remedy
    assert not calls


def test_param_grad_mirrors_the_derived_gradient_on_every_access(tf, models):
    model, x = models.mlp()
    options = tl.backends.tf.GradOptions(loss_fn=lambda output: tf.reduce_sum(output))
    trace = tl.trace(model, x, backend="tf", capture=CaptureOptions(grad_options=options))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    expected = tape.gradient(loss, model.trainable_variables)
    params = trace.params
    assert trace.params["layers.0.kernel"] is params["layers.0.kernel"]
    for address, gradient in zip(
        ["layers.0.kernel", "layers.0.bias", "layers.1.kernel", "layers.1.bias"], expected
    ):
        assert params[address].grad is trace.autograd.derived_grads[f"params.{address}"]
        np.testing.assert_allclose(trace.params[address].grad.numpy(), gradient.numpy(), rtol=1e-5, atol=1e-6)
    assert tl.trace(model, x, backend="tf").params["layers.0.kernel"].grad is None
