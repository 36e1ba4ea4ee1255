"""Every JAX refusal: a typed ``BackendUnsupportedError`` whose code is in REFUSAL_CODES, raised
before the function's effects run (its callbacks never fire, no capture session is left open)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import torchlens as tl
from conformance.models.jax import mlp, mlp_args, scan_rnn, scan_rnn_args
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.jax

CALLS = {"callback": 0}


def _count(value):
    CALLS["callback"] += 1
    return value


def with_io_callback(params, x):
    y = jax.experimental.io_callback(_count, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return y @ params["fc1"]["w"]


def with_debug_print(params, x):
    jax.debug.print("x = {}", x)
    return x @ params["fc1"]["w"]


_OUTSIDE = jnp.arange(8.0)


def jit_with_constants(params, x):
    return jax.jit(lambda v: v + _OUTSIDE)(x) @ params["fc1"]["w"]


def jit_with_donation(params, x):
    return jax.jit(lambda v: v * 2.0, donate_argnums=0)(x) @ params["fc1"]["w"]


def _inside_jit():
    params, x = mlp_args()
    jax.jit(lambda p, v: tl.trace(mlp, (p, v), backend="jax").outputs[0].out)(params, x)


def _trace(fn=mlp, args=None, **keywords):
    return tl.trace(fn, args if args is not None else mlp_args(), backend="jax", **keywords)


JAX_TRIGGERS = {
    "transformed_root_callable": lambda: _trace(jax.jit(mlp)),
    "callback_effects": lambda: _trace(with_io_callback),
    "nested_primitive_unsupported": lambda: _trace(
        scan_rnn, scan_rnn_args(), capture=CaptureOptions(jax_control_flow="reject")
    ),
}

#: Preview-shared and capability codes the JAX backend raises.
JAX_SHARED_TRIGGERS = {
    "intervene_unsupported": lambda: _trace(intervene=object()),
    "stop_after_unsupported": lambda: _trace(stop_after=tl.func("tanh")),
    "value_dependent_save_unsupported": lambda: _trace(save=tl.where(lambda op: True)),
    "followed_by_unsupported": lambda: _trace(save=tl.followed_by(tl.func("add"), tl.func("max"))),
    "streaming_unsupported": lambda: _trace(streaming=tl.StreamingOptions(path="refused.tlspec")),
    "save_grads_unsupported": lambda: _trace(capture=CaptureOptions(extra={"save_grads": True})),
    "option_unsupported": lambda: _trace(capture=CaptureOptions(module_identity_mode="object_module")),
}


@pytest.mark.parametrize("code", sorted({**JAX_TRIGGERS, **JAX_SHARED_TRIGGERS}))
def test_each_jax_refusal_is_typed(code):
    triggers = {**JAX_TRIGGERS, **JAX_SHARED_TRIGGERS}
    CALLS["callback"] = 0
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        triggers[code]()
    assert caught.value.code == code
    assert caught.value.code in tl.backends.REFUSAL_CODES
    assert caught.value.remedy
    assert caught.value.framework == "jax"
    assert CALLS["callback"] == 0


@pytest.mark.parametrize(
    "transform",
    [jax.jit, jax.vmap, jax.grad, lambda f: jax.value_and_grad(f), jax.jacfwd, jax.checkpoint],
    ids=["jit", "vmap", "grad", "value_and_grad", "jacfwd", "checkpoint"],
)
def test_transformed_roots_refuse(transform):
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        _trace(transform(lambda params, x: jnp.sum(mlp(params, x))))
    assert caught.value.code == "transformed_root_callable"


def test_capture_from_inside_a_transform_refuses():
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        _inside_jit()
    assert caught.value.code == "transformed_root_callable"


@pytest.mark.parametrize("fn", [with_debug_print, with_io_callback], ids=["debug_print", "io_callback"])
def test_callback_effects_refuse(fn):
    CALLS["callback"] = 0
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        _trace(fn)
    assert caught.value.code == "callback_effects"
    assert CALLS["callback"] == 0


@pytest.mark.parametrize(
    "fn", [jit_with_constants, jit_with_donation], ids=["closed_constants", "donated_inputs"]
)
def test_impure_nested_jit_refuses(fn):
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        _trace(fn)
    assert caught.value.code == "nested_primitive_unsupported"


def test_unsupported_nested_primitive_refuses():
    from jax.sharding import Mesh, PartitionSpec

    mesh = Mesh(jax.devices()[:1], ("x",))

    def sharded(params, x):
        body = jax.shard_map(
            lambda v: v * 2.0, mesh=mesh, in_specs=PartitionSpec(), out_specs=PartitionSpec()
        )
        return body(x) @ params["fc1"]["w"]

    with pytest.raises(tl.BackendUnsupportedError) as caught:
        _trace(sharded)
    assert caught.value.code == "nested_primitive_unsupported"


def test_a_deleted_closure_array_is_unrealizable():
    gone = jnp.arange(8.0) + 1.0
    gone.delete()
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        _trace(lambda params, x: (x * gone) @ params["fc1"]["w"])
    assert caught.value.code == "constant_unrealizable"
    assert caught.value.code in tl.backends.REFUSAL_CODES


def test_no_session_is_left_open_after_a_refusal():
    with pytest.raises(tl.BackendUnsupportedError):
        _trace(with_debug_print)
    # The next capture works normally.
    assert _trace().validate_forward_pass([]) is True


def test_record_refuses_on_jax_before_the_function_runs():
    CALLS["callback"] = 0
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.record(with_io_callback, mlp_args(), backend="jax")
    assert caught.value.code == "capability_unsupported"
    assert caught.value.framework == "jax"
    assert "sparse_recording" in caught.value.message
    assert CALLS["callback"] == 0
    # backend=None routes a JAX function to JAX and refuses the same way.
    with pytest.raises(tl.BackendUnsupportedError) as routed:
        tl.record(mlp, mlp_args())
    assert routed.value.framework == "jax"


def test_editing_a_finished_jax_trace_refuses(tmp_path):
    trace = _trace()
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        trace.fork()
    assert caught.value.code == "capability_unsupported"
    assert caught.value.framework == "jax"
    assert "edit_finished_trace" in caught.value.message
    path = tmp_path / "mlp.tlspec"
    trace.save(str(path))
    with pytest.raises(tl.BackendUnsupportedError) as loaded:
        tl.load(str(path)).fork()
    assert loaded.value.framework == "jax"


@pytest.mark.parametrize(
    "function",
    [lambda x: "done", lambda x: (x * 2, ["a label"]), lambda x: {"value": x, "note": object()}],
)
def test_a_function_returning_something_other_than_arrays_is_a_typed_error(function):
    # JAX alone would say that a function in the adapter returned an invalid JAX type.
    with pytest.raises(tl.TorchLensError) as caught:
        tl.trace(function, jnp.ones(3))
    assert caught.value.code == "model_output_unsupported"
    assert "roots.py" not in str(caught.value)
