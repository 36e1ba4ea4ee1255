"""The NaN finder and the dead-unit counter, on torch and JAX traces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax

import torchlens as tl


def test_find_nan_names_the_first_op_that_produced_a_nan_on_jax():
    def fn(params, x):
        y = x * params["a"]
        z = jnp.log(y)  # negative entries become NaN here
        return jnp.exp(z) + 1.0

    trace = tl.trace(fn, ({"a": jnp.float32(-1.0)}, jnp.array([1.0, -2.0, 3.0])), backend="jax")
    finding = tl.debug.find_nan(trace)
    assert finding.found and finding.func_name == "log" and finding.kind == "nan"
    assert finding.parents_finite is True
    assert finding.label == trace.select(tl.func("log"))[0].label
    clean = tl.trace(fn, ({"a": jnp.float32(1.0)}, jnp.array([1.0, 2.0, 3.0])), backend="jax")
    assert tl.debug.find_nan(clean).found is False


def test_find_nan_reports_unsaved_ops_as_uncertain():
    def fn(params, x):
        return jnp.sqrt(x * params["a"]) + 1.0

    trace = tl.trace(fn, ({"a": jnp.float32(-1.0)}, jnp.ones(3)), backend="jax", save=tl.func("add"))
    finding = tl.debug.find_nan(trace)
    assert finding.func_name == "add" and finding.parents_finite is False
    assert [label.split("_")[0] for label in finding.uncertainty_zone] == ["mul", "sqrt"]


def test_dead_units_on_a_jax_convolution_need_the_channel_axis():
    kernel = jnp.ones((3, 1, 3, 3))
    bias = jnp.array([0.0, -100.0, 0.5])

    def fn(params, x):
        y = lax.conv_general_dilated(
            x, params["k"], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return jax.nn.relu(y + params["b"][None, :, None, None])

    trace = tl.trace(fn, ({"k": kernel, "b": bias}, jnp.ones((2, 1, 4, 4))), backend="jax")
    relu = trace.select(tl.func("max"))[0].label
    rows = {row.label: row for row in tl.debug.dead_units(trace, dim=1)}
    assert rows[relu].total_units == 3 and rows[relu].dead_indices == (1,)
    assert rows[relu].dead_fraction == 1 / 3
    # Along the last (width) axis no unit is dead.
    assert {row.label: row for row in tl.debug.dead_units(trace, dim=-1)}[relu].dead_count == 0


@pytest.mark.torch
def test_dead_units_and_find_nan_on_torch():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    with torch.no_grad():
        model[0].weight.fill_(1.0)
        model[0].bias.copy_(torch.tensor([0.0, -100.0, 0.0, 0.0]))
    trace = tl.trace(model, torch.ones(2, 3))
    rows = {row.label: row for row in tl.debug.dead_units(trace)}
    assert rows["relu_1_3"].dead_indices == (1,)
    assert tl.debug.find_nan(trace).found is False
    nan_trace = tl.trace(lambda x: torch.log(x - 2), torch.ones(3))
    finding = tl.debug.find_nan(nan_trace)
    assert finding.found and finding.func_name == "log"
    np.testing.assert_array_equal(np.isnan(nan_trace[finding.label].out.numpy()), [True] * 3)
