"""Derived gradients on JAX: leaf gradients match jax.grad computed directly, per-op gradients
pass an independent check before they are exposed, and none of it is a captured backward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torchlens as tl
from conformance.models.jax import attention, attention_args, mlp, mlp_args, scan_rnn, scan_rnn_args
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.jax


def test_the_spec_gradient_example_runs_unchanged():
    def fn(params, x):
        return jnp.tanh(x @ params["w"] + params["b"])

    params = {"w": jnp.ones((3, 2)), "b": jnp.zeros((2,))}
    grad_options = tl.backends.jax.GradOptions(
        params=params,
        loss_fn=lambda output: jnp.sum(output * output),
        input_grad_argnums=(0,),
    )
    trace = tl.trace(
        fn, (params, jnp.ones((4, 3))), backend="jax", capture=CaptureOptions(grad_options=grad_options)
    )
    grads = trace.autograd.derived_grads
    expected = jax.grad(lambda p, x: jnp.sum(fn(p, x) ** 2), argnums=(0, 1))(params, jnp.ones((4, 3)))
    np.testing.assert_allclose(grads["params.w"], expected[0]["w"], rtol=1e-6)
    np.testing.assert_allclose(grads["params.b"], expected[0]["b"], rtol=1e-6)
    np.testing.assert_allclose(grads["inputs.0"], expected[1], rtol=1e-6)
    assert trace.autograd.has_backward_pass is False
    assert trace.autograd.intermediate_derived_grads == {}


@pytest.mark.parametrize(
    "fn,args", [(mlp, mlp_args()), (attention, attention_args())], ids=["mlp", "attention"]
)
def test_leaf_gradients_match_jax_grad(fn, args):
    params, x = args
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.mean(out**2), input_grad_argnums=(0,))
    trace = tl.trace(fn, (params, x), backend="jax", capture=CaptureOptions(grad_options=options))
    expected = jax.grad(lambda p, v: jnp.mean(fn(p, v) ** 2), argnums=(0, 1))(params, x)
    for path, value in jax.tree_util.tree_leaves_with_path(expected[0]):
        name = "params." + ".".join(str(entry.key) for entry in path)
        np.testing.assert_allclose(trace.autograd.derived_grads[name], value, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(trace.autograd.derived_grads["inputs.0"], expected[1], rtol=1e-5, atol=1e-7)


def test_intermediate_gradients_are_checked_and_exposed_per_op():
    params, x = mlp_args()
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out**2), intermediate_grads=True)
    trace = tl.trace(mlp, (params, x), backend="jax", capture=CaptureOptions(grad_options=options))
    records = trace.autograd.intermediate_derived_grads
    relu = trace.select(tl.func("max"))[0]
    assert relu.label in records
    # Independently: the gradient of the loss with respect to the relu output.
    w2, b2 = params["fc2"]["w"], params["fc2"]["b"]
    expected = jax.grad(lambda h: jnp.sum((h @ w2 + b2) ** 2))(relu.out)
    record = relu.autograd.derived_grad
    assert record.status == "exact" and record.checks == ("boundary_replacement_grad", "finite_difference")
    np.testing.assert_allclose(record.value, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(record, expected, rtol=1e-5, atol=1e-6)
    output_producer = trace.outputs[0].parents[0]
    np.testing.assert_allclose(records[output_producer.label], 2 * output_producer.out, rtol=1e-5)
    assert trace["input_1"].autograd.derived_grad is None
    assert trace.autograd.has_backward_pass is False


def test_intermediate_gradients_through_an_unrolled_scan():
    params, xs = scan_rnn_args(steps=3)
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out[0]), intermediate_grads=True)
    trace = tl.trace(scan_rnn, (params, xs), backend="jax", capture=CaptureOptions(grad_options=options))
    last = trace.select(tl.func("tanh"))[-1]
    np.testing.assert_allclose(
        trace.autograd.intermediate_derived_grads[last.label], jnp.ones((2, 4)), rtol=1e-6
    )


def test_requests_above_the_cap_fail():
    params, x = mlp_args()
    options = tl.backends.jax.GradOptions(intermediate_grads=True, max_intermediate_grads=2)
    with pytest.raises(tl.errors.LimitExceededError) as caught:
        tl.trace(mlp, (params, x), backend="jax", capture=CaptureOptions(grad_options=options))
    assert caught.value.code == "intermediate_grads_over_cap"


def test_grad_options_of_another_backend_refuse():
    params, x = mlp_args()
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(mlp, (params, x), backend="jax", capture=CaptureOptions(grad_options=object()))
    assert caught.value.code == "option_unsupported"


def test_a_function_jax_grad_cannot_differentiate_refuses_with_a_typed_error():
    from conformance.models.jax import while_args, while_loop

    params, x = while_args()
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out))
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(while_loop, (params, x), backend="jax", capture=CaptureOptions(grad_options=options))
    assert caught.value.code == "capability_unsupported"
    assert "while_loop" in caught.value.remedy


def test_leaf_gradients_through_a_custom_vjp_region_match_jax_grad():
    from conformance.models.jax import custom_vjp_args, custom_vjp_fn

    params, x = custom_vjp_args()
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out), intermediate_grads=True)
    trace = tl.trace(custom_vjp_fn, (params, x), backend="jax", capture=CaptureOptions(grad_options=options))
    expected = jax.grad(lambda p: jnp.sum(custom_vjp_fn(p, x)))(params)
    np.testing.assert_allclose(trace.autograd.derived_grads["params.a"], expected["a"], rtol=1e-6)


def test_intermediate_gradients_are_withheld_when_the_graph_does_not_reproduce_the_output():
    params, x = mlp_args()
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out**2))
    trace = tl.trace(mlp, (params, x), backend="jax", capture=CaptureOptions(grad_options=options))
    from torchlens.backends.jax.grads import INTERMEDIATE_REPLAY_DIVERGED, _intermediate
    from torchlens.trace import Autograd

    checked = Autograd()
    _intermediate(trace, options, options.loss_fn, checked)
    assert checked.intermediate_derived_grads and checked.intermediate_unavailable is None
    values = trace._runtime.values
    output_producer = trace.outputs[0].parents[0]._info["value"]
    values[output_producer] = values[output_producer] + 1.0  # the recorded output no longer matches
    withheld = Autograd()
    with pytest.warns(tl.errors.DerivedGradUnavailableWarning):
        _intermediate(trace, options, options.loss_fn, withheld)
    assert withheld.intermediate_derived_grads == {}
    assert withheld.intermediate_unavailable == INTERMEDIATE_REPLAY_DIVERGED
