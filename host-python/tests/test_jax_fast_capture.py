"""The two things that make a JAX capture fast keep it exact: equations call the executable an
eager bind would call (every value bit-identical to binding each equation), and a function is
traced to a jaxpr once per call signature, like ``jax.jit`` (a second capture reuses it; new
shapes, dtypes, static arguments, closure cells or configuration trace again)."""

from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_jax_constructs import CASES, PARAMS, X

import torchlens as tl
from conformance.models.jax import battery, custom_vjp_args, custom_vjp_fn, scan_rnn, scan_rnn_args
from torchlens.backends.jax import capture as jax_capture
from torchlens.backends.jax import jaxpr_cache
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.jax


def _functions():
    entries = [(name, fn, args) for name, fn, args in battery()]
    entries.append(("custom_vjp", custom_vjp_fn, custom_vjp_args()))
    entries += [(name, CASES[name], (PARAMS, X)) for name in sorted(CASES)]
    return entries


def _ops(trace):
    """Every op's identity and value bytes (typed keys as their key data)."""
    found = []
    for op in trace.ops:
        value = op.out
        if value is not None and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        raw = None if value is None else (np.asarray(value).dtype.str, np.asarray(value).tobytes())
        parents = tuple(parent.label for parent in op.parents)
        found.append((op.label, op.func_name, tuple(op.shape or ()), op.dtype, parents, raw))
    return found


@pytest.mark.parametrize("name,fn,args", _functions(), ids=[entry[0] for entry in _functions()])
def test_direct_dispatch_is_bit_identical_to_binding_each_equation(name, fn, args, monkeypatch):
    fast = _ops(tl.trace(fn, args, backend="jax"))
    monkeypatch.setattr(jax_capture, "direct_dispatch_allowed", lambda: False)
    jaxpr_cache.clear()
    bound = _ops(tl.trace(fn, args, backend="jax"))
    assert fast == bound


def _counting(scale):
    calls = []

    def fn(params, x):
        calls.append(x.shape)
        return jnp.tanh(x @ params["w"]) * scale

    return fn, calls


def test_a_second_capture_reuses_the_jaxpr_and_records_the_same_trace():
    fn, calls = _counting(2.0)
    params, x = {"w": jnp.ones((3, 2))}, jnp.arange(6.0).reshape(2, 3)
    first = tl.trace(fn, (params, x), backend="jax")
    second = tl.trace(fn, (params, x), backend="jax")
    assert len(calls) == 1
    assert _ops(first) == _ops(second)
    # New values of the same shapes reuse the jaxpr and record the new values.
    third = tl.trace(fn, (params, x + 1.0), backend="jax")
    assert len(calls) == 1
    assert second.validation_replay_status.state == "passed"  # replay runs the function itself
    np.testing.assert_array_equal(third.outputs[0].out, fn(params, x + 1.0))


def test_new_shapes_dtypes_static_leaves_or_closures_trace_again():
    fn, calls = _counting(2.0)
    params, x = {"w": jnp.ones((3, 2))}, jnp.ones((2, 3))
    tl.trace(fn, (params, x), backend="jax")
    tl.trace(fn, (params, jnp.ones((4, 3))), backend="jax")
    assert len(calls) == 2
    tl.trace(fn, ({"w": jnp.ones((3, 2), jnp.bfloat16)}, x.astype(jnp.bfloat16)), backend="jax")
    assert len(calls) == 3
    # A static (non-array) leaf is part of the call signature.
    tl.trace(fn, ({"w": params["w"], "n": 1}, x), backend="jax")
    tl.trace(fn, ({"w": params["w"], "n": 2}, x), backend="jax")
    assert len(calls) == 5
    # Another function object with the same code is another function.
    other, other_calls = _counting(3.0)
    trace = tl.trace(other, (params, x), backend="jax")
    assert len(other_calls) == 1
    np.testing.assert_array_equal(trace.outputs[0].out, other(params, x))


def test_a_rebound_closure_cell_traces_again():
    offset = jnp.zeros(3)

    def fn(x):
        return x + offset

    assert tl.trace(fn, jnp.ones(3), backend="jax").outputs[0].out.tolist() == [1.0, 1.0, 1.0]
    offset = jnp.full(3, 5.0)  # noqa: F841 - read by fn through its closure cell
    assert tl.trace(fn, jnp.ones(3), backend="jax").outputs[0].out.tolist() == [6.0, 6.0, 6.0]


def test_a_configuration_change_traces_again():
    fn, calls = _counting(2.0)
    params, x = {"w": jnp.ones((3, 2))}, jnp.ones((2, 3))
    tl.trace(fn, (params, x), backend="jax")
    with jax.default_matmul_precision("highest"):
        tl.trace(fn, (params, x), backend="jax")
    assert len(calls) == 2


def test_refusals_still_come_from_a_cached_jaxpr():
    params, xs = scan_rnn_args()
    tl.trace(scan_rnn, (params, xs), backend="jax")
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(scan_rnn, (params, xs), backend="jax", capture=CaptureOptions(jax_control_flow="reject"))
    assert caught.value.code == "nested_primitive_unsupported"


def test_a_deleted_closure_constant_is_refused_on_a_cached_jaxpr():
    constant = jnp.arange(3.0)

    def fn(x):
        return x * constant

    tl.trace(fn, jnp.ones(3), backend="jax")
    constant.delete()
    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(fn, jnp.ones(3), backend="jax")
    assert caught.value.code == "constant_unrealizable"


def test_the_cache_is_bounded():
    jaxpr_cache.clear()
    functions = [lambda x, index=index: x * index for index in range(jaxpr_cache.CAPACITY + 5)]
    for fn in functions:
        tl.trace(fn, jnp.ones(2), backend="jax")
    assert jaxpr_cache.cached_count() == jaxpr_cache.CAPACITY


def test_a_collected_function_leaves_the_cache():
    jaxpr_cache.clear()
    weights = jnp.ones(8)

    def fn(x):
        return x * weights

    tl.trace(fn, jnp.ones(8), backend="jax")
    assert jaxpr_cache.cached_count() == 1
    collected = weakref.ref(fn)
    del fn
    gc.collect()
    assert collected() is None
    assert jaxpr_cache.cached_count() == 0
