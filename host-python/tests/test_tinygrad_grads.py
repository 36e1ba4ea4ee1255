"""Derived gradients on tinygrad: leaf gradients equal tinygrad's own ``backward()``; per-op
gradients are attached only on an exact structural match; nothing the user holds changes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad import Tensor  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.tinygrad import Mlp, input_of  # noqa: E402
from torchlens.options import CaptureOptions  # noqa: E402

pytestmark = pytest.mark.tinygrad


def fn(x):
    return ((x + 1).relu() * 2).sum()


def test_the_spec_derived_gradient_example_runs_unchanged():
    grad_options = tl.backends.tinygrad.GradOptions(input_grad_argnums=(0,))
    trace = tl.trace(
        fn, Tensor([1.0, -2.0, 3.0]), backend="tinygrad", capture=CaptureOptions(grad_options=grad_options)
    )
    grad = trace.autograd.derived_grads["inputs.0"]
    x = Tensor([1.0, -2.0, 3.0])
    fn(x).backward()
    np.testing.assert_array_equal(grad.numpy(), x.grad.numpy())
    np.testing.assert_array_equal(grad.numpy(), [2.0, 0.0, 2.0])
    assert trace.autograd.has_backward_pass is False


def test_leaf_gradients_of_a_module_equal_tinygrads_backward_and_touch_nothing():
    model, x = Mlp(), Tensor(input_of("mlp"))
    options = tl.backends.tinygrad.GradOptions(
        loss_fn=lambda output: (output * output).sum(), input_grad_argnums=(0,)
    )
    trace = tl.trace(model, x, backend="tinygrad", capture=CaptureOptions(grad_options=options))
    assert model.fc1.weight.grad is None and x.grad is None
    derived = trace.autograd.derived_grads
    assert sorted(derived) == [
        "inputs.0",
        "params.fc1.bias",
        "params.fc1.weight",
        "params.fc2.bias",
        "params.fc2.weight",
    ]
    reference = Mlp()
    xr = Tensor(input_of("mlp"))
    out = reference(xr)
    (out * out).sum().backward()
    np.testing.assert_allclose(derived["inputs.0"].numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-6)
    for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
        layer, attribute = name.split(".")
        expected = getattr(getattr(reference, layer), attribute).grad.numpy()
        np.testing.assert_allclose(derived[f"params.{name}"].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_intermediate_gradients_are_exact_records_equal_to_backward():
    model, x = Mlp(), Tensor(input_of("mlp"))
    options = tl.backends.tinygrad.GradOptions(intermediate_grads=True)
    trace = tl.trace(model, x, backend="tinygrad", capture=CaptureOptions(grad_options=options))
    records = trace.autograd.intermediate_derived_grads
    assert trace.autograd.intermediate_unavailable is None
    floating = [op for op in trace.ops if op.kind == "compute" and op.dtype == "float32"]
    assert records and set(records) <= {op.label for op in floating}
    assert all(record.status == "exact" for record in records.values())
    # d(sum(output))/d(output) is ones; the hidden layer's gradient is ones @ W2 masked by ReLU
    output_producer = trace.outputs[0].parents[0]
    np.testing.assert_array_equal(records[output_producer.label].value.numpy(), np.ones((2, 3, 3)))
    relu = trace.select(tl.func("where") & tl.in_module("self"))[0]
    w2 = model.fc2.weight.numpy()
    np.testing.assert_allclose(relu.autograd.derived_grad.value.numpy(), np.ones((2, 3, 3)) @ w2, rtol=1e-5)
    assert trace.autograd.has_backward_pass is False
    assert model.fc1.weight.grad is None


def test_a_pass_that_builds_another_graph_attaches_nothing():
    state = {"calls": 0}

    def changing(x):
        state["calls"] += 1
        return (x * 2).relu() if state["calls"] == 1 else (x * 3).tanh()

    options = tl.backends.tinygrad.GradOptions(intermediate_grads=True)
    with pytest.warns(tl.errors.DerivedGradUnavailableWarning):
        trace = tl.trace(
            changing, Tensor([1.0, -1.0]), backend="tinygrad", capture=CaptureOptions(grad_options=options)
        )
    assert trace.autograd.intermediate_derived_grads == {}
    assert trace.autograd.intermediate_unavailable == "intermediate_replay_diverged"
