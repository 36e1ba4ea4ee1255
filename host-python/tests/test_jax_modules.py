"""Equinox and Flax NNX module roots: the module tree with training=False, parameter owners
from path-keyed leaves, equations attributed to the module that ran them (jax.named_scope), and
the refusals inside attributed modules."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import torchlens as tl
from conformance.models.jax import EqxConvAttention, NnxConvAttention, StatefulNet, nnx_mlp
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.jax


def eqx_mlp():
    return eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(0))


def test_an_equinox_mlp_is_attributed_by_module():
    model, x = eqx_mlp(), jnp.linspace(-1, 1, 3)
    trace = tl.trace(model, x)
    assert trace.backend == "jax"
    assert trace.provenance.module_identity_mode == "pytree_module"
    assert trace.provenance.param_source == "pytree-derived"
    modules = trace.modules
    assert {"self", "layers", "layers.0", "layers.1", "layers.2"} <= set(modules)
    assert all(module.training is False for module in modules.values())
    assert modules["layers"].is_container
    assert trace.params["layers.1.weight"].module == "layers.1"
    assert sorted(modules["layers.0"].params) == ["layers.0.bias", "layers.0.weight"]
    first = trace.select(tl.in_module("layers.0"))
    assert [op.func_name for op in first] == ["dot_general", "add"]
    np.testing.assert_allclose(first[-1].out, model.layers[0](x), rtol=1e-6)
    boundary = trace.select(tl.module("layers.1"))
    np.testing.assert_allclose(boundary[-1].out, model.layers[1](jax.nn.relu(model.layers[0](x))), rtol=1e-6)
    relu = trace.select(tl.func("max"))
    assert [op.module for op in relu] == ["self", "self"]
    np.testing.assert_allclose(trace.outputs[0].out, model(x), rtol=1e-6)
    assert trace.validate_forward_pass([]) is True


def test_a_flax_nnx_mlp_is_attributed_by_module():
    model, x = nnx_mlp(), jnp.linspace(-1, 1, 6).reshape(2, 3)
    expected = model(x)
    trace = tl.trace(model, x, backend="jax")
    modules = trace.modules
    assert {"self", "fc1", "norm", "blocks", "blocks.0", "blocks.1"} <= set(modules)
    assert modules["norm"].class_name == "BatchNorm"
    assert all(module.training is False for module in modules.values())
    params = trace.params
    assert params["fc1.kernel"].module == "fc1" and params["fc1.kernel"].trainable
    assert params["norm.mean"].module == "norm" and not params["norm.mean"].trainable
    np.testing.assert_allclose(trace.select(tl.module("fc1"))[-1].out, model.fc1(x), rtol=1e-6)
    assert {op.module for op in trace.select(tl.in_module("norm"))} == {"norm:1"}
    np.testing.assert_allclose(trace.outputs[0].out, expected, rtol=1e-6)
    assert trace.validate_forward_pass([]) is True
    # The trace did not change the model.
    np.testing.assert_array_equal(model(x), expected)


def test_repeated_calls_of_one_module_are_passes():
    class Twice(eqx.Module):
        inner: eqx.nn.Linear

        def __call__(self, x):
            return self.inner(jnp.tanh(self.inner(x)))

    model = Twice(eqx.nn.Linear(3, 3, key=jax.random.key(1)))
    trace = tl.trace(model, jnp.ones(3), backend="jax")
    assert trace.modules["inner"].num_calls == 2
    assert trace.select(tl.module("inner:2"))[-1].label.endswith(":2")


def test_function_root_mode_keeps_only_the_root_module():
    model = eqx_mlp()
    trace = tl.trace(
        model, jnp.ones(3), backend="jax", capture=CaptureOptions(module_identity_mode="function_root")
    )
    assert list(trace.modules) == ["self"]
    assert trace.provenance.module_identity_mode == "function_root"
    assert "layers.0.weight" in trace.params
    assert trace.validate_forward_pass([]) is True


class ScanInside(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return jax.lax.scan(lambda h, _: (jnp.tanh(h * self.weight), None), x, None, length=3)[0]


class JitInside(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return jax.jit(lambda v: v * self.weight)(x)


class CondInside(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return jax.lax.cond(x[0] > 0, lambda v: v * self.weight, lambda v: v, x)


class CheckpointInside(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return jax.checkpoint(lambda v: jnp.sin(v * self.weight))(x)


class WhileInside(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return jax.lax.while_loop(lambda v: v[0] < 2.0, lambda v: v * self.weight + 1.0, x)


@jax.custom_vjp
def _identity(v):
    return v


_identity.defvjp(lambda v: (v, None), lambda _, g: (g,))


class CustomVjpInside(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return _identity(x * self.weight)


class Counter(nnx.Module):
    def __init__(self):
        self.count = nnx.Variable(jnp.zeros(()))
        self.weight = nnx.Param(jnp.ones(3))

    def __call__(self, x):
        self.count[...] = self.count[...] + 1
        return x * self.weight


@pytest.mark.parametrize(
    "model",
    [
        ScanInside(jnp.ones(3)),
        JitInside(jnp.ones(3)),
        CondInside(jnp.ones(3)),
        WhileInside(jnp.ones(3)),
        CheckpointInside(jnp.ones(3)),
        CustomVjpInside(jnp.ones(3)),
        Counter(),
    ],
    ids=["scan", "jit", "cond", "while_loop", "remat", "custom_vjp", "nnx_state_rebinding"],
)
def test_inside_attributed_modules_transforms_refuse(model):
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(model, jnp.ones(3), backend="jax")
    assert caught.value.code == "nested_primitive_unsupported"
    assert "function_root" in caught.value.remedy or "outside" in caught.value.remedy


def test_equinox_derived_gradients_match_filter_grad():
    model, x = eqx_mlp(), jnp.linspace(-1, 1, 3)
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out**2))
    trace = tl.trace(model, x, backend="jax", capture=CaptureOptions(grad_options=options))
    expected = eqx.filter_grad(lambda m: jnp.sum(m(x) ** 2))(model)
    np.testing.assert_allclose(
        trace.autograd.derived_grads["params.layers.0.weight"], expected.layers[0].weight, rtol=1e-5
    )


def test_flax_modules_refuse_derived_gradients():
    options = tl.backends.jax.GradOptions(loss_fn=lambda out: jnp.sum(out))
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(nnx_mlp(), jnp.ones((2, 3)), backend="jax", capture=CaptureOptions(grad_options=options))
    assert caught.value.code == "capability_unsupported"
    assert caught.value.code in tl.backends.REFUSAL_CODES


def test_static_module_selectors_choose_what_is_saved():
    model, x = eqx_mlp(), jnp.linspace(-1, 1, 3)
    trace = tl.trace(model, x, backend="jax", save=tl.module("layers.1") | tl.label("max_1_4"))
    saved = [op.label for op in trace.saved_ops]
    assert saved == ["max_1_4", "add_2_6"]
    np.testing.assert_allclose(
        trace["add_2_6"].out, model.layers[1](jax.nn.relu(model.layers[0](x))), rtol=1e-6
    )
    assert trace.validate_forward_pass([]) is True


def test_module_roots_route_to_jax_with_numpy_inputs():
    model = CondInside(jnp.ones(3))
    assert tl.backends.resolve(model, np.ones(3, np.float32), None).name == "jax"
    assert tl.backends.resolve(nnx_mlp(), np.ones((2, 3), np.float32), None).name == "jax"


def test_nnx_dropout_in_training_mode_refuses_as_random_numbers_in_the_graph():
    class Noisy(nnx.Module):
        def __init__(self, rngs):
            self.fc = nnx.Linear(3, 3, rngs=rngs)
            self.drop = nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x):
            return self.drop(self.fc(x))

    model = Noisy(nnx.Rngs(0))
    model.train()
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(model, jnp.ones((2, 3)), backend="jax")
    assert caught.value.code == "rng_state_in_graph"
    assert caught.value.code in tl.backends.REFUSAL_CODES
    model.eval()
    assert tl.trace(model, jnp.ones((2, 3)), backend="jax").validate_forward_pass([]) is True


@pytest.mark.parametrize(
    "model,x",
    [
        (EqxConvAttention(), jnp.linspace(-1, 1, 192).reshape(3, 8, 8)),
        (NnxConvAttention(nnx.Rngs(0)), jnp.linspace(-1, 1, 192).reshape(1, 8, 8, 3)),
    ],
    ids=["equinox", "flax_nnx"],
)
def test_convolution_and_attention_modules_capture_and_validate(model, x):
    trace = tl.trace(model, x, backend="jax")
    assert trace.validate_forward_pass([]) is True
    np.testing.assert_allclose(trace.outputs[0].out, model(x), rtol=1e-5, atol=1e-6)
    assert "conv_general_dilated" in [op.func_name for op in trace.select(tl.in_module("conv"))]
    attention = [address for address in trace.modules if address.startswith("attention.")]
    assert attention and all(
        trace.modules[address].num_calls >= 1 for address in attention if "drop" not in address
    )


def test_equinox_state_and_a_keyed_dropout_capture_and_validate():
    model, state = eqx.nn.make_with_state(StatefulNet)(jax.random.key(0))
    x = jnp.linspace(-1, 1, 3)
    trace = tl.trace(model, (x, state), kwargs={"key": jax.random.key(1)}, backend="jax")
    assert trace.validate_forward_pass([]) is True
    names = [op._info["name"] for op in trace.inputs]
    assert names[0] == "x" and names[-1] == "key" and any(name.startswith("state.") for name in names)
    expected = model(x, state, key=jax.random.key(1))[0]
    np.testing.assert_allclose(trace.outputs[0].out, expected, rtol=1e-6)
    assert "<svg" in trace.draw(collapsed=True).svg


def test_module_classes_are_restored_after_a_capture_and_after_a_refusal():
    mlp_call, linear_call = eqx.nn.MLP.__call__, eqx.nn.Linear.__call__
    tl.trace(eqx_mlp(), jnp.ones(3), backend="jax")
    assert eqx.nn.MLP.__call__ is mlp_call and eqx.nn.Linear.__call__ is linear_call
    counter_call = Counter.__call__
    with pytest.raises(tl.BackendUnsupportedError):
        tl.trace(Counter(), jnp.ones(3), backend="jax")
    assert Counter.__call__ is counter_call
    assert "tlm" not in repr(jax.make_jaxpr(eqx_mlp())(jnp.ones(3)).jaxpr.eqns[0].source_info.name_stack)


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_module_classes_are_restored_when_the_forward_raises_or_is_interrupted(error):
    from torchlens.adapter_kit.session import open_session_count

    class Raising(eqx.Module):
        inner: eqx.nn.Linear

        def __call__(self, x):
            self.inner(x)
            raise error("raised inside the forward")

    model = Raising(eqx.nn.Linear(3, 3, key=jax.random.key(0)))
    linear_call, raising_call = eqx.nn.Linear.__call__, Raising.__call__
    with pytest.raises(error):
        tl.trace(model, jnp.ones(3), backend="jax")
    assert eqx.nn.Linear.__call__ is linear_call and Raising.__call__ is raising_call
    assert open_session_count() == 0
    assert tl.trace(eqx_mlp(), jnp.ones(3), backend="jax").validate_forward_pass([]) is True


def test_a_module_shared_under_two_nnx_attributes_is_one_record_with_both_addresses():
    class Shared(nnx.Module):
        def __init__(self, rngs):
            self.first = nnx.Linear(3, 3, rngs=rngs)
            self.second = self.first

        def __call__(self, x):
            return self.second(jnp.tanh(self.first(x)))

    model = Shared(nnx.Rngs(0))
    trace = tl.trace(model, jnp.ones((1, 3)), backend="jax")
    assert trace.modules["first"].all_addresses == ["first", "second"]
    assert trace.modules["first"].num_calls == 2
    assert "second" not in trace.modules
    np.testing.assert_allclose(trace.outputs[0].out, model(jnp.ones((1, 3))), rtol=1e-6)
    assert trace.validate_forward_pass([]) is True
