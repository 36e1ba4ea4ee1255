"""Live intervene= on TensorFlow: module-boundary and entry-point edits change what flows on
(checked against a manual recomputation), replay validation re-applies the declared edit, and
what the wrap layer cannot serve refuses with a typed error.

TensorFlow is imported inside the fixtures, never at collection (see test_tf_capture.py)."""

from __future__ import annotations

import numpy as np
import pytest

import torchlens as tl
from torchlens.errors import BackendUnsupportedError
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def models(tf):
    from conformance.models import tf as tf_models

    return tf_models


def _mlp_by_hand(model, x, hidden_edit=lambda h: h):
    kernel, bias, kernel2, bias2 = [w.numpy() for w in model.weights]
    hidden = hidden_edit(np.maximum(x.numpy() @ kernel + bias, 0))
    return hidden @ kernel2 + bias2


def test_the_spec_zero_ablation_of_relu(tf, models):
    model, x = models.mlp()
    ablated = tl.trace(model, x, backend="tf", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    relu = [op for op in ablated.ops if op.func_name == "relu"][0]
    assert relu.is_edited
    np.testing.assert_array_equal(relu.out.numpy(), np.zeros(relu.shape, "float32"))
    expected = _mlp_by_hand(model, x, lambda h: np.zeros_like(h))
    np.testing.assert_allclose(ablated.outputs[0].out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert ablated.validation_replay_status.state == "passed"


def test_a_module_output_is_scaled_at_the_call_boundary(tf, models):
    model, x = models.mlp()
    edited = tl.trace(model, x, backend="tf", intervene=tl.when(tl.module("layers.0"), tl.scale(0.5)))
    expected = _mlp_by_hand(model, x, lambda h: h * 0.5)
    np.testing.assert_allclose(edited.outputs[0].out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert edited.validation_replay_status.state == "passed"


def test_add_and_a_callable_action(tf, models):
    model, x = models.mlp()
    added = tl.trace(model, x, backend="tf", intervene=tl.when(tl.func("relu"), tl.add(1.0)))
    np.testing.assert_allclose(
        added.outputs[0].out.numpy(), _mlp_by_hand(model, x, lambda h: h + 1.0), rtol=1e-5, atol=1e-5
    )
    negated = tl.trace(model, x, backend="tf", intervene=tl.when(tl.func("relu"), lambda value: -value))
    np.testing.assert_allclose(
        negated.outputs[0].out.numpy(), _mlp_by_hand(model, x, lambda h: -h), rtol=1e-5, atol=1e-5
    )


def test_a_callable_reads_the_op_context_and_may_return_numpy(tf, models):
    model, x = models.mlp()
    seen = []

    def halve(value, ctx):
        seen.append((ctx.func_name, ctx.shape))
        return value.numpy() * 0.5  # converted back to a tensor of the value's dtype

    edited = tl.trace(model, x, backend="tf", intervene=tl.when(tl.func("relu"), halve))
    assert seen == [("relu", (2, 8))]
    np.testing.assert_allclose(
        edited.outputs[0].out.numpy(), _mlp_by_hand(model, x, lambda h: h * 0.5), rtol=1e-5, atol=1e-6
    )
    assert edited.validation_replay_status.state == "passed"


def test_an_op_outside_the_wrap_layer_is_unreachable(tf, models):
    model, x = models.mlp()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, x, backend="tf", intervene=tl.when(tl.func("matmul"), tl.zero_ablate()))
    assert caught.value.code == "tf_intervene_unreachable" and caught.value.remedy


REFUSED = {
    "value_dependent_predicate": lambda m, x: tl.trace(
        m, x, backend="tf", intervene=tl.when(tl.where(lambda op: True), tl.zero_ablate())
    ),
    "gradient_site_intervention_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", intervene=tl.when(tl.func("relu"), tl.zero_ablate(), direction="backward")
    ),
    "mixed_module_selector": lambda m, x: tl.trace(
        m, x, backend="tf", intervene=tl.when(tl.module("layers.0") | tl.func("relu"), tl.zero_ablate())
    ),
    "option_unsupported": lambda m, x: tl.trace(
        m,
        x,
        backend="tf",
        intervene=tl.when(tl.func("relu"), tl.zero_ablate()),
        capture=CaptureOptions(grad_options=_grad_options()),
    ),
}


def _grad_options():
    return tl.backends.tf.GradOptions()


@pytest.mark.parametrize("code", sorted(REFUSED))
def test_each_edit_refusal_fires_before_the_model_runs(tf, models, code):
    model, x = models.mlp()
    calls = []
    original = model.call

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    model.call = counting
    try:
        with pytest.raises(BackendUnsupportedError) as caught:
            REFUSED[code](model, x)
    finally:
        del model.call
    assert caught.value.code == code and caught.value.remedy
    assert not calls


@pytest.mark.parametrize("selector", ["func", "module"])
def test_a_shape_changing_replacement_refuses_and_returns_no_trace(tf, models, selector):
    from torchlens.adapter_kit.session import open_session_count

    model, x = models.mlp()
    where = tl.func("relu") if selector == "func" else tl.module("layers.0")
    with pytest.raises(tl.errors.TorchLensError) as caught:
        tl.trace(model, x, backend="tf", intervene=tl.when(where, lambda value: tf.concat([value, value], 0)))
    assert caught.value.code == "edit_shape_changed" and caught.value.remedy
    assert open_session_count() == 0
