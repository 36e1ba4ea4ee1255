"""A model's declaration is kept between its traces and reused only while nothing in it changed
(``torchlens/backends/torch/model_declaration.py``): every change a user makes between two
traces shows in the second one."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

import torchlens as tl
from torchlens.backends.torch import model_declaration

pytestmark = pytest.mark.torch


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def test_an_unchanged_model_reuses_its_declaration_and_a_changed_one_does_not():
    model = _model()
    first = model_declaration.declaration_of(model, model_declaration.WalkedModel(model), 1)
    again = model_declaration.declaration_of(model, model_declaration.WalkedModel(model), 1)
    assert again is first
    model.eval()
    changed = model_declaration.declaration_of(model, model_declaration.WalkedModel(model), 1)
    assert changed is not first
    assert [module[4] for module in changed.modules] == [False] * 5
    # Parameters numbered from another id cannot reuse the events that name them.
    assert model_declaration.declaration_of(model, model_declaration.WalkedModel(model), 7) is not changed


def _check(model, x, **expected):
    with torch.no_grad():
        trace = tl.trace(model, x)
    for key, value in expected.items():
        assert value(trace), key
    return trace


def test_every_change_between_two_traces_shows_in_the_second():
    model = _model()
    x = torch.randn(3, 4)
    _check(model, x, training=lambda t: t.modules["1"].training)
    model.eval()
    _check(model, x, eval=lambda t: not t.modules["1"].training and not t.modules["self"].training)
    model[0].weight.requires_grad_(False)
    _check(model, x, frozen=lambda t: not t.params["0.weight"].trainable and t.params["0.bias"].trainable)
    model[2] = nn.GELU()
    _check(model, x, replaced=lambda t: t.modules["2"].class_name == "GELU")
    model.append(nn.Linear(2, 3))
    _check(model, x, added=lambda t: "4" in t.modules and t.params["4.weight"].shape == (3, 2))
    model[3].weight.data = torch.randn(5, 4)
    model[3].bias.data = torch.randn(5)
    model[4] = nn.Linear(5, 3)
    _check(model, x, reshaped=lambda t: t.params["3.weight"].shape == (5, 4))
    new_bias = nn.Parameter(torch.full((4,), 7.0))
    model[0].bias = new_bias
    trace = _check(model, x)
    linear = next(op for op in trace.ops if op.func_name == "linear")
    assert torch.equal(linear.value, x @ model[0].weight.T + 7.0)
    model.double()
    _check(model, x.double(), cast=lambda t: t.params["0.weight"].dtype == "float64")
    # A reassigned buffer is a new tensor: still read as the module's buffer, not as a constant.
    model[1].running_mean = torch.zeros(4, dtype=torch.float64)
    trace = _check(model, x.double())
    kinds = [op.kind for op in trace.ops]
    assert kinds.count("buffer") == 2 and "constant" not in kinds


def test_a_module_shared_at_two_addresses_is_declared_once_on_every_trace():
    shared = nn.Linear(3, 3)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    x = torch.randn(2, 3)
    for _ in range(3):
        with torch.no_grad():
            trace = tl.trace(model, x)
        assert list(trace.modules) == ["self", "0", "1"]
        assert trace.modules["0"].all_addresses == ["0", "2"]
        assert trace.modules["0"].num_calls == 2
        assert set(trace.params) == {"0.weight", "0.bias"}


def test_a_dropped_model_leaves_nothing_kept():
    model = _model()
    with torch.no_grad():
        tl.trace(model, torch.randn(3, 4))
    key = id(model)
    assert key in model_declaration._KEPT
    del model
    gc.collect()
    kept = model_declaration._KEPT.get(key)
    assert kept is None or kept[0]() is not None
