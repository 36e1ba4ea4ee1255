"""Derived gradients on Paddle equal ``paddle.grad`` computed by hand; per-op records are exact
structural matches only; nothing the user holds changes; has_backward_pass stays False."""

from __future__ import annotations

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

import paddle.nn as nn  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.paddle import Cnn, Mlp, _fixed, _input  # noqa: E402
from torchlens.errors import DerivedGradUnavailableWarning, LimitExceededError  # noqa: E402
from torchlens.options import CaptureOptions  # noqa: E402

pytestmark = pytest.mark.paddle


def _by_hand(model, x, loss_fn):
    copy = x.detach()
    copy.stop_gradient = False
    params = [param for param in model.parameters() if not param.stop_gradient]
    loss = loss_fn(model(copy))
    grads = paddle.grad([loss], params + [copy], allow_unused=True)
    names = [name for name, param in model.named_parameters() if not param.stop_gradient]
    return dict(zip([f"params.{name}" for name in names] + ["inputs.0"], grads))


@pytest.mark.parametrize("build, shape", [(Mlp, (2, 6)), (Cnn, (2, 2, 5, 5))], ids=["mlp", "cnn"])
def test_leaf_derived_grads_equal_paddle_grad(build, shape):
    model, x = _fixed(build()).eval(), _input(*shape)
    loss_fn = lambda output: paddle.sum(output * output)  # noqa: E731
    options = tl.backends.paddle.GradOptions(loss_fn=loss_fn, input_grad_argnums=(0,))
    trace = tl.trace(model, x, backend="paddle", capture=CaptureOptions(grad_options=options))
    expected = _by_hand(model, x, loss_fn)
    assert set(trace.autograd.derived_grads) == set(expected)
    for key, grad in expected.items():
        np.testing.assert_allclose(
            trace.autograd.derived_grads[key].numpy(), grad.numpy(), rtol=1e-5, atol=1e-6
        )
    assert trace.autograd.has_backward_pass is False
    assert x.stop_gradient and all(param.grad is None for param in model.parameters())


def test_the_spec_example_runs_unchanged():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = paddle.ones([1, 3], dtype="float32")
    grad_options = tl.backends.paddle.GradOptions(
        loss_fn=lambda output: paddle.sum(output * output),
        input_grad_argnums=(0,),
    )
    trace = tl.trace(model, x, backend="paddle", capture=CaptureOptions(grad_options=grad_options))
    assert tuple(trace.autograd.derived_grads["inputs.0"].shape) == (1, 3)


def test_intermediate_grads_equal_paddle_grad_of_each_op():
    model, x = _fixed(Mlp()).eval(), _input(2, 6)
    options = tl.backends.paddle.GradOptions(intermediate_grads=True)
    trace = tl.trace(model, x, backend="paddle", capture=CaptureOptions(grad_options=options))
    records = trace.autograd.intermediate_derived_grads
    assert set(records) == {op.label for op in trace.ops if op.kind == "compute"}
    assert all(record.status == "exact" for record in records.values())
    # by hand: d(sum(tanh(fc2(relu(fc1 x)))))/d(relu output)
    hidden = paddle.nn.functional.relu(model.fc1(x))
    hidden.stop_gradient = False
    out = model.fc2(hidden).tanh()
    (expected,) = paddle.grad([out.sum()], [hidden])
    relu = next(op for op in trace.ops if op.func_name == "relu")
    np.testing.assert_allclose(np.asarray(records[relu.label]), expected.numpy(), rtol=1e-5, atol=1e-6)
    assert relu.autograd.derived_grad is records[relu.label]


def test_a_diverging_gradient_pass_exposes_nothing():
    calls = []

    def fn(x):
        calls.append(1)
        return x * 2 if len(calls) == 1 else (x * 2).tanh()

    options = tl.backends.paddle.GradOptions(intermediate_grads=True, input_grad_argnums=(0,))
    with pytest.warns(DerivedGradUnavailableWarning):
        trace = tl.trace(fn, paddle.ones([3]), backend="paddle", capture=CaptureOptions(grad_options=options))
    assert trace.autograd.intermediate_derived_grads == {}
    assert trace.autograd.intermediate_unavailable == "intermediate_replay_diverged"


def test_too_many_intermediate_grads_refuse():
    options = tl.backends.paddle.GradOptions(intermediate_grads=True, max_intermediate_grads=1)
    with pytest.raises(LimitExceededError):
        tl.trace(
            _fixed(Mlp()).eval(), _input(2, 6), backend="paddle", capture=CaptureOptions(grad_options=options)
        )
