"""JAX capture on real JAX: every equation of the jaxpr is one op, its saved value equals a value
computed independently, control flow unrolls (or becomes a region over the cap), closure arrays
are constants, and replay validation passes on a clean capture."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import torchlens as tl
from conformance.models.jax import (
    CONSTANT,
    attention,
    attention_args,
    battery,
    closure_args,
    closure_constant,
    cnn,
    cnn_args,
    cond_args,
    cond_fn,
    custom_vjp_args,
    custom_vjp_fn,
    mlp,
    mlp_args,
    nested_jit,
    nested_jit_args,
    scan_rnn,
    scan_rnn_args,
    while_args,
    while_loop,
)
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.jax


def funcs(trace):
    return [op.func_name for op in trace.ops]


def test_the_spec_example_runs_unchanged():
    def fn(params, x):
        return jnp.tanh(x @ params["w"] + params["b"])

    params = {"w": jnp.ones((3, 2)), "b": jnp.zeros((2,))}
    trace = tl.trace(fn, (params, jnp.ones((4, 3))), backend="jax")
    assert trace.validate_forward_pass([]) is True
    assert trace.backend == "jax"
    assert trace.provenance.param_source == "pytree-derived"
    assert trace.provenance.module_identity_mode == "function_root"
    assert list(trace.modules) == ["self"]
    assert sorted(trace.params) == ["b", "w"]
    np.testing.assert_array_equal(trace.outputs[0].out, fn(params, jnp.ones((4, 3))))


def test_backend_none_routes_a_function_of_jax_arrays_to_jax():
    params, x = mlp_args()
    assert tl.trace(mlp, (params, x)).backend == "jax"


def test_mlp_values_equal_an_independent_numpy_computation():
    params, x = mlp_args()
    trace = tl.trace(mlp, (params, x), backend="jax")
    host = {name: np.asarray(value) for name, value in jax.tree_util.tree_leaves_with_path(params)}
    w1, b1 = np.asarray(params["fc1"]["w"]), np.asarray(params["fc1"]["b"])
    w2, b2 = np.asarray(params["fc2"]["w"]), np.asarray(params["fc2"]["b"])
    assert host
    xs = np.asarray(x)
    first, second = trace.select(tl.func("dot_general"))
    np.testing.assert_allclose(first.out, xs @ w1, rtol=1e-5, atol=1e-5)
    relu = trace.select(tl.func("max"))[0]
    np.testing.assert_allclose(relu.out, np.maximum(xs @ w1 + b1, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second.out, np.maximum(xs @ w1 + b1, 0) @ w2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        trace.outputs[0].out, np.maximum(xs @ w1 + b1, 0) @ w2 + b2, rtol=1e-5, atol=1e-5
    )
    assert sorted(trace.params) == ["fc1.b", "fc1.w", "fc2.b", "fc2.w"]
    assert trace.params["fc1.w"].shape == (8, 16)
    assert first.params == ["fc1.w"]
    assert [op.label for op in trace.inputs] == ["input_1"]
    assert trace.inputs[0].parents == []


def test_a_single_argument_function_has_no_parameters():
    trace = tl.trace(lambda x: jnp.sin(x) * 2.0, jnp.ones(3), backend="jax")
    assert trace.provenance.param_source == "none"
    assert trace.params == {}
    assert funcs(trace) == ["input", "sin", "mul", "output"]


def test_cnn_convolutions_equal_lax_conv_run_directly():
    params, x = cnn_args()
    trace = tl.trace(cnn, (params, x), backend="jax")
    convs = trace.select(tl.func("conv_general_dilated"))
    assert len(convs) == 2
    expected = lax.conv_general_dilated(
        x, params["k1"], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
    )
    np.testing.assert_allclose(convs[0].out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trace.outputs[0].out, cnn(params, x), rtol=1e-5, atol=1e-5)
    assert convs[0].attributes["window_strides"] == "(1, 1)"


def test_attention_softmax_rows_sum_to_one():
    params, x = attention_args()
    trace = tl.trace(attention, (params, x), backend="jax")
    division = [op for op in trace.ops if op.func_name == "div"][-1]
    np.testing.assert_allclose(np.asarray(division.out).sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(trace.outputs[0].out, attention(params, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,fn,args", battery(), ids=[entry[0] for entry in battery()])
def test_each_battery_function_validates_and_reproduces_its_output(name, fn, args):
    trace = tl.trace(fn, args, backend="jax")
    status = trace.validation_replay_status
    assert status.state == "passed", (status, [d for d in status.decisions if d[1] != "passed"][:5])
    assert trace.validate_forward_pass([]) is True
    for op, value in zip(trace.outputs, jax.tree_util.tree_leaves(fn(*args))):
        np.testing.assert_allclose(op.out, value, rtol=1e-5, atol=1e-5)


def test_scan_under_the_cap_unrolls_each_step():
    params, xs = scan_rnn_args(steps=3)
    trace = tl.trace(scan_rnn, (params, xs), backend="jax")
    tanh = trace.select(tl.func("tanh"))
    assert len(tanh) == 3
    # The unrolled cell reproduces each step computed by hand.
    h = np.zeros((2, 4), np.float32)
    for step, op in enumerate(tanh):
        h = np.tanh(h @ np.asarray(params["wh"]) + np.asarray(xs[step]) @ np.asarray(params["wx"]))
        np.testing.assert_allclose(op.out, h, rtol=1e-5, atol=1e-5)
    assert len(trace.select(tl.func("index_in_dim"))) == 3
    stacked = trace.select(tl.func("stack"))[0]
    np.testing.assert_allclose(stacked.out, scan_rnn(params, xs)[1], rtol=1e-5, atol=1e-5)
    assert "scan" not in funcs(trace)


def test_scan_over_the_cap_is_a_region_and_validation_is_unverified():
    params, xs = scan_rnn_args(steps=5)
    trace = tl.trace(
        scan_rnn, (params, xs), backend="jax", capture=CaptureOptions(jax_max_control_flow_unroll=4)
    )
    boundary = trace.select(tl.func("scan"))
    assert len(boundary) == 1 and boundary[0].attributes["region"] == "true"
    projections = trace.select(tl.func("region_output"))
    assert len(projections) == 2
    assert all(op.parents == boundary for op in projections)
    h, ys = scan_rnn(params, xs)
    np.testing.assert_allclose(projections[0].out, h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(projections[1].out, ys, rtol=1e-5, atol=1e-5)
    assert "tanh" not in funcs(trace)
    status = trace.validation_replay_status
    assert status.state == "unverified" and status.reason == "opaque_region"
    assert status.failed == 0
    with pytest.raises(TypeError):
        bool(status)


def test_region_mode_forces_regions_and_reject_mode_refuses():
    params, xs = scan_rnn_args(steps=2)
    trace = tl.trace(scan_rnn, (params, xs), backend="jax", capture=CaptureOptions(jax_control_flow="region"))
    assert "scan" in funcs(trace) and "tanh" not in funcs(trace)
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(scan_rnn, (params, xs), backend="jax", capture=CaptureOptions(jax_control_flow="reject"))
    assert caught.value.code == "nested_primitive_unsupported"
    assert caught.value.code in tl.backends.REFUSAL_CODES


def test_while_loop_unrolls_under_the_cap_and_is_a_region_over_it():
    params, x = while_args()
    trace = tl.trace(while_loop, (params, x), backend="jax")
    sines = trace.select(tl.func("sin"))
    assert len(sines) == 3
    # Every loop test is recorded: three that admitted a trip and the failing fourth.
    assert len(trace.select(tl.func("lt"))) == 4
    value = np.asarray(x)
    for op in sines:
        value = np.sin(value * np.float32(1.5))
        np.testing.assert_allclose(op.out, value, rtol=1e-5, atol=1e-5)
    capped = tl.trace(
        while_loop, (params, x), backend="jax", capture=CaptureOptions(jax_max_control_flow_unroll=2)
    )
    assert "while" in funcs(capped) and "sin" not in funcs(capped)
    np.testing.assert_allclose(capped.outputs[0].out, while_loop(params, x), rtol=1e-6)
    assert capped.validation_replay_status.state == "unverified"


def test_cond_records_only_the_branch_taken():
    params, x = cond_args(positive=True)
    taken = funcs(tl.trace(cond_fn, (params, x), backend="jax"))
    assert "exp" in taken and "neg" not in taken
    params, x = cond_args(positive=False)
    other = funcs(tl.trace(cond_fn, (params, x), backend="jax"))
    assert "neg" in other and "exp" not in other
    region = tl.trace(cond_fn, (params, x), backend="jax", capture=CaptureOptions(jax_control_flow="region"))
    assert "cond" in funcs(region) and "neg" not in funcs(region)
    np.testing.assert_allclose(region.outputs[0].out, cond_fn(params, x), rtol=1e-6)


def test_a_closure_array_is_a_constant_parent():
    params, x = closure_args()
    trace = tl.trace(closure_constant, (params, x), backend="jax")
    constants = [op for op in trace.ops if op.kind == "constant"]
    assert len(constants) == 1 and constants[0].parents == []
    np.testing.assert_array_equal(constants[0].out, CONSTANT)
    add = trace.select(tl.func("add"))[0]
    assert constants[0] in add.parents


def test_nested_jit_is_inlined():
    params, x = nested_jit_args()
    trace = tl.trace(nested_jit, (params, x), backend="jax")
    assert "jit" not in funcs(trace) and "cos" in funcs(trace)
    np.testing.assert_allclose(trace.select(tl.func("cos"))[0].out, jnp.cos(x @ params["w"]), rtol=1e-6)


def test_a_custom_vjp_call_is_a_region():
    params, x = custom_vjp_args()
    trace = tl.trace(custom_vjp_fn, (params, x), backend="jax")
    assert "custom_vjp_call" in funcs(trace) and "clamp" not in funcs(trace)
    np.testing.assert_allclose(trace.outputs[0].out, custom_vjp_fn(params, x), rtol=1e-6)
    assert trace.validation_replay_status.state == "unverified"


def test_static_save_keeps_only_selected_payloads_and_validation_still_replays():
    params, x = mlp_args()
    trace = tl.trace(mlp, (params, x), backend="jax", save=tl.func("max") | tl.label_contains("dotgeneral_2"))
    assert [op.func_name for op in trace.saved_ops] == ["max", "dot_general"]
    assert trace.select(tl.func("add"))[0].out is None
    assert trace.validate_forward_pass([]) is True
    nothing = tl.trace(mlp, (params, x), backend="jax", save=False)
    assert nothing.saved_ops == []


def test_a_tampered_runtime_value_fails_validation_and_names_the_op():
    params, x = mlp_args()
    trace = tl.trace(mlp, (params, x), backend="jax")
    target = trace.select(tl.func("max"))[0]
    values = trace._runtime.values
    value_id = target._info["value"]
    values[value_id] = values[value_id] + 1.0
    status = trace.validation_replay_status
    assert status.state == "failed"
    assert status.first_failed_op == target.label


def test_a_wrong_expected_output_fails_validation():
    params, x = mlp_args()
    trace = tl.trace(mlp, (params, x), backend="jax")
    assert trace.validate_forward_pass([mlp(params, x) + 1.0]) is False


def test_draw_and_summary_work_on_a_jax_trace():
    params, x = attention_args()
    trace = tl.trace(attention, (params, x), backend="jax")
    assert "<svg" in trace.draw().svg
    assert "dot_general" in trace.summary()


def test_pytree_and_keyword_inputs_are_named_by_their_paths():
    def fn(params, batch, *, scale):
        return (batch["image"] * params["w"] + batch["bias"]) * scale

    params = {"w": jnp.full((3,), 2.0)}
    batch = {"image": jnp.arange(3.0), "bias": jnp.ones(3)}
    trace = tl.trace(fn, (params, batch), kwargs={"scale": jnp.float32(3.0)}, backend="jax")
    assert [op._info["name"] for op in trace.inputs] == ["batch.bias", "batch.image", "scale"]
    np.testing.assert_allclose(trace.outputs[0].out, fn(params, batch, scale=jnp.float32(3.0)))
    assert trace.validate_forward_pass([]) is True


def test_the_jax_protocol_has_every_part():
    from torchlens.backends import BackendProtocol, get_spec

    spec = get_spec("jax")
    assert spec.maturity == "preview"
    assert (spec.requirement.minimum, spec.requirement.ceiling, spec.requirement.pinned) == (
        "0.7.1",
        "0.11",
        "0.10.2",
    )
    assert spec.requirement.extra == "jax"
    protocol = spec.protocol()
    assert isinstance(protocol, BackendProtocol)
    params, x = mlp_args()
    reference = protocol.reference_output(mlp, (params, x), {})
    np.testing.assert_array_equal(reference, mlp(params, x))
    copy = protocol.host_copy(reference)
    assert isinstance(copy, np.ndarray)
    np.testing.assert_array_equal(copy, reference)
    assert protocol.realize([reference])[0] is reference
    assert set(protocol.refusal_codes) <= tl.backends.REFUSAL_CODES
    assert tl.backends.get_backend("jax").spec is spec


def test_a_flax_linen_apply_is_a_raw_callable():
    import flax.linen as nn

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(nn.relu(nn.Dense(4)(x)))

    model, x = Mlp(), jnp.linspace(-1, 1, 6).reshape(2, 3)
    variables = model.init(jax.random.key(0), x)
    trace = tl.trace(model.apply, (variables, x), backend="jax")
    assert trace.provenance.param_source == "pytree-derived"
    assert "params.Dense_0.kernel" in trace.params
    np.testing.assert_allclose(trace.outputs[0].out, model.apply(variables, x), rtol=1e-6)
    assert trace.validate_forward_pass([]) is True


def test_outputs_that_are_an_input_or_a_parameter_leaf():
    params = {"w": jnp.arange(3.0)}
    trace = tl.trace(lambda p, x: (p["w"], x, x * 2), (params, jnp.ones(3)), backend="jax")
    first, second, third = trace.outputs
    assert first.parents[0].func_name == "copy" and first.parents[0].params == ["w"]
    np.testing.assert_array_equal(first.out, params["w"])
    assert second.parents[0].kind == "input"
    np.testing.assert_array_equal(third.out, jnp.full(3, 2.0))
    assert trace.validate_forward_pass([]) is True
