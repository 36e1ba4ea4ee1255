"""Live intervene= and stop_after= on real MLX: outputs equal hand-made edits, early stop leaves
later forward code unexecuted, tampered edit declarations fail validation."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")

import torchlens as tl  # noqa: E402
from conformance.models.mlx import Mlp, Shared  # noqa: E402

pytestmark = pytest.mark.mlx


def by_hand(model, x, edit_hidden=None, edit_fc1=None):
    h = model.fc1(x)
    if edit_fc1 is not None:
        h = edit_fc1(h)
    h = nn.relu(h)
    if edit_hidden is not None:
        h = edit_hidden(h)
    return model.fc2(h)


X = mx.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))

ACTIONS = {
    "zero": (tl.zero_ablate(), lambda h: mx.zeros_like(h)),
    "scale": (tl.scale(0.5), lambda h: h * 0.5),
    "add_scalar": (tl.add(1.0), lambda h: h + 1.0),
    "add_array": (tl.add(mx.arange(4, dtype=mx.float32)), lambda h: h + mx.arange(4, dtype=mx.float32)),
    "clamp": (tl.clamp(min=0.1, max=0.3), lambda h: mx.clip(h, 0.1, 0.3)),
    "mean": (tl.mean_ablate(), lambda h: mx.full(h.shape, h.mean())),
    "replace": (tl.replace_with(mx.ones((2, 4))), lambda h: mx.ones((2, 4))),
    "callable": (lambda h: h * -1.0, lambda h: h * -1.0),
}


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_intervene_on_func_equals_hand_edit(name):
    action, hand = ACTIONS[name]
    model = Mlp()
    trace = tl.trace(model, X, backend="mlx", intervene=tl.when(tl.func("relu"), action))
    expected = by_hand(model, X, edit_hidden=hand)
    assert np.allclose(np.array(trace.outputs[0].out), np.array(expected), atol=1e-5)
    relu = next(op for op in trace.ops if op.func_name == "relu")
    assert relu.is_edited and relu.out.shape == (2, 4) and relu.out.dtype == mx.float32


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_intervened_trace_validates_and_hook_internals_are_not_ops(name):
    action, _ = ACTIONS[name]
    plain = tl.trace(Mlp(), X, backend="mlx")
    trace = tl.trace(Mlp(), X, backend="mlx", intervene=tl.when(tl.func("relu"), action))
    assert [op.func_name for op in trace.ops] == [op.func_name for op in plain.ops]
    assert trace.validate_forward_pass(None) is True


def test_module_rule_fires_once_at_exit_and_unions_work():
    model = Mlp()
    trace = tl.trace(
        model, X, backend="mlx", intervene=tl.when(tl.module("fc1") | tl.module("fc2"), tl.scale(2.0))
    )
    expected = model.fc2(nn.relu(model.fc1(X) * 2.0)) * 2.0
    assert np.allclose(np.array(trace.outputs[0].out), np.array(expected), atol=1e-5)
    edited = [op for op in trace.ops if op.is_edited]
    assert len(edited) == 2 and all(len(op.fire_records) == 1 for op in edited)
    assert trace.validate_forward_pass(None) is True


def test_stop_after_leaves_later_code_unexecuted():
    model = Mlp()
    trace = tl.trace(model, X, backend="mlx", stop_after=tl.func("relu"))
    assert trace.is_stopped and trace.stop_reason
    assert model.after == 0
    assert not any(op.func_name == "addmm" and op.module.startswith("fc2") for op in trace.ops)
    assert trace.stop_reason == "stop_after" and trace.info["frontier"]
    assert trace.validate_forward_pass(None) is True
    # Parameter accounting covers the captured ops only.
    assert sorted(trace.params) == ["fc1.bias", "fc1.weight"]
    assert sorted(tl.trace(Mlp(), X, backend="mlx").params) == [
        "fc1.bias",
        "fc1.weight",
        "fc2.bias",
        "fc2.weight",
    ]
    stopped = tl.trace(model, X, backend="mlx", stop_after=tl.module("fc1"))
    assert stopped.is_stopped and model.after == 0


def test_forged_or_stripped_edit_declaration_fails_validation():
    model = Mlp()
    trace = tl.trace(model, X, backend="mlx", intervene=tl.when(tl.func("relu"), tl.scale(3.0)))
    relu = next(op for op in trace.ops if op.func_name == "relu")
    relu._info["edits"] = []  # stripped
    assert trace.validate_forward_pass(None) is not True
    plain = tl.trace(model, X, backend="mlx")
    relu = next(op for op in plain.ops if op.func_name == "relu")
    relu._info["edits"] = [("when(forged)", "scale(3.0)", "post")]  # forged
    assert plain.validate_forward_pass(None) is not True


def test_in_module_and_label_rules():
    model = Mlp()
    inside = tl.trace(model, X, backend="mlx", intervene=tl.when(tl.in_module("fc2"), tl.scale(0.0)))
    assert np.allclose(np.array(inside.outputs[0].out), 0.0)
    assert [op.func_name for op in inside.ops if op.is_edited] == ["T", "addmm"]
    assert inside.validate_forward_pass(None) is True
    plain = tl.trace(model, X, backend="mlx")
    relu_label = next(op.label for op in plain.ops if op.func_name == "relu")
    by_label = tl.trace(model, X, backend="mlx", intervene=tl.when(tl.label(relu_label), tl.add(1.0)))
    expected = by_hand(model, X, edit_hidden=lambda h: h + 1.0)
    assert np.allclose(np.array(by_label.outputs[0].out), np.array(expected), atol=1e-5)
    stopped = tl.trace(model, X, backend="mlx", stop_after=tl.label(relu_label))
    assert stopped.is_stopped and stopped.ops[-1].func_name == "relu"


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.split = Splitter()
        self.out = nn.Linear(2, 1)

    def __call__(self, x):
        a, b = self.split(x)
        return self.out(a * b)


class Splitter(nn.Module):
    def __call__(self, x):
        return tuple(mx.split(x, 2, axis=-1))


def test_module_rule_on_a_tuple_output_and_multi_output_ops():
    x = mx.array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    model = TwoHeads()
    trace = tl.trace(model, x, backend="mlx", intervene=tl.when(tl.module("split"), tl.scale(2.0)))
    a, b = mx.split(x, 2, axis=-1)
    expected = model.out((a * 2.0) * (b * 2.0))
    assert np.allclose(np.array(trace.outputs[0].out), np.array(expected), atol=1e-5)
    assert len([op for op in trace.ops if op.is_edited]) == 2
    assert trace.validate_forward_pass(None) is True


@pytest.mark.parametrize(
    "action", [tl.replace_with(mx.ones((3, 3))), lambda h: h[:1]], ids=["replace_with", "callable"]
)
def test_shape_changing_edits_refuse(action):
    from torchlens.errors import UnsupportedError

    with pytest.raises(UnsupportedError) as caught:
        tl.trace(Mlp(), X, backend="mlx", intervene=tl.when(tl.func("relu"), action))
    assert caught.value.code == "edit_shape_changed"


def test_a_module_rule_for_one_call_of_a_repeated_module():
    model = Shared()
    x = mx.ones((1, 4))
    trace = tl.trace(model, x, backend="mlx", intervene=tl.when(tl.module("block:2"), tl.scale(-1.0)))
    expected = model.block(nn.relu(model.block(x))) * -1.0
    assert np.allclose(np.array(trace.outputs[0].out), np.array(expected), atol=1e-5)
    assert len([op for op in trace.ops if op.is_edited]) == 1
    assert trace.validate_forward_pass(None) is True
    first = tl.trace(model, x, backend="mlx", stop_after=tl.module("block:1"))
    assert first.is_stopped and [op.func_name for op in first.ops][-1] == "addmm"
