"""Derived gradients on real MLX equal mx.value_and_grad."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")

import torchlens as tl  # noqa: E402
from torchlens.options import CaptureOptions  # noqa: E402

pytestmark = pytest.mark.mlx


def test_spec_grad_example_equals_value_and_grad():
    mx.random.seed(2)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = mx.ones((1, 3))
    grad_options = tl.backends.mlx.GradOptions(
        loss_fn=lambda output: mx.sum(output * output), input_grad_argnums=(0,)
    )
    trace = tl.trace(model, x, backend="mlx", capture=CaptureOptions(grad_options=grad_options))

    def loss(params, inp):
        model.update(params)
        out = model(inp)
        return mx.sum(out * out)

    _, (param_grads, input_grad) = mx.value_and_grad(loss, argnums=(0, 1))(model.parameters(), x)
    assert np.allclose(np.array(trace.autograd.derived_grads["inputs.0"]), np.array(input_grad), atol=1e-6)
    from mlx.utils import tree_flatten

    for address, value in tree_flatten(param_grads):
        assert np.allclose(
            np.array(trace.autograd.derived_grads[f"params.{address}"]), np.array(value), atol=1e-6
        )
    assert trace.autograd.has_backward_pass is False


def test_intermediate_grads_are_checked_and_equal_value_and_grad_at_the_op():
    mx.random.seed(4)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = mx.array([[0.5, -1.0, 2.0]])
    grad_options = tl.backends.mlx.GradOptions(
        loss_fn=lambda output: mx.sum(output * output), intermediate_grads=True
    )
    trace = tl.trace(model, x, backend="mlx", capture=CaptureOptions(grad_options=grad_options))
    records = trace.autograd.intermediate_derived_grads
    relu = next(op for op in trace.ops if op.func_name == "relu")
    assert relu.label in records and records[relu.label].status == "exact"
    # By hand: d loss / d relu output = 2 * out @ W2.
    out = model(x)
    expected = (2 * out) @ model.layers[2].weight
    assert np.allclose(np.array(records[relu.label].value), np.array(expected), atol=1e-5)
    assert relu.autograd.derived_grad is records[relu.label]
    assert trace.modules["layers.0"].num_calls == 1


def test_intermediate_grads_over_the_cap_fail():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    grad_options = tl.backends.mlx.GradOptions(intermediate_grads=True, max_intermediate_grads=1)
    with pytest.raises(Exception) as caught:
        tl.trace(model, mx.ones((1, 3)), backend="mlx", capture=CaptureOptions(grad_options=grad_options))
    assert "max_intermediate_grads" in str(caught.value)


def test_a_shared_parameter_gets_its_whole_gradient_under_its_primary_address():
    from conformance.models.mlx import SharedLayers as Shared

    mx.random.seed(5)
    model = Shared()
    x = mx.random.normal((2, 4))
    options = tl.backends.mlx.GradOptions(loss_fn=lambda out: mx.sum(out * out))
    trace = tl.trace(model, x, backend="mlx", capture=CaptureOptions(grad_options=options))
    grads = trace.autograd.derived_grads
    assert "params.alias.weight" not in grads
    weight = np.array(model.layers[0].weight, dtype=np.float64)

    def loss_at(delta):
        changed = weight.copy()
        changed[0, 0] += delta
        model.layers[0].weight = mx.array(changed.astype(np.float32))
        out = model(x)
        value = float(mx.sum(out * out).item())
        model.layers[0].weight = mx.array(weight.astype(np.float32))
        return value

    step = 1e-2
    numeric = (loss_at(step) - loss_at(-step)) / (2 * step)
    assert abs(float(grads["params.layers.0.weight"][0, 0].item()) - numeric) < 1e-2 * max(1.0, abs(numeric))


def test_a_plain_function_gets_input_gradients_and_op_gradients():
    def fn(x):
        return mx.tanh(x * 2.0).sum()

    x = mx.array([0.1, -0.3, 0.7])
    options = tl.backends.mlx.GradOptions(input_grad_argnums=(0,), intermediate_grads=True)
    trace = tl.trace(fn, x, backend="mlx", capture=CaptureOptions(grad_options=options))
    expected = mx.grad(fn)(x)
    assert np.allclose(np.array(trace.autograd.derived_grads["inputs.0"]), np.array(expected), atol=1e-6)
    tanh = next(op for op in trace.ops if op.func_name == "tanh")
    assert np.allclose(np.array(tanh.autograd.derived_grad.value), 1.0)


def test_the_model_keeps_its_own_parameters_after_derived_gradients():
    from mlx.utils import tree_flatten

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    before = {address: id(array) for address, array in tree_flatten(model.parameters())}
    x = mx.ones((1, 3))
    expected = np.array(model(x))
    options = tl.backends.mlx.GradOptions(input_grad_argnums=(0,), intermediate_grads=True)
    tl.trace(model, x, backend="mlx", capture=CaptureOptions(grad_options=options))
    assert {address: id(array) for address, array in tree_flatten(model.parameters())} == before
    assert np.allclose(np.array(model(x)), expected)
