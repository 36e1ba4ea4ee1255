"""Live edits and early stop on Paddle: intervene= replaces values as they are produced (static
selectors, callables on the concrete value, tl.module at the call's exit), replacements flow
downstream and equal hand-made edits, stop_after= leaves later code unexecuted, replay checks
edits and a stripped or forged edit declaration fails validation."""

from __future__ import annotations

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

import paddle.nn as nn  # noqa: E402
import paddle.nn.functional as F  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.paddle import Counting, Residual, _fixed, _input  # noqa: E402
from torchlens.adapter_kit.session import open_session_count  # noqa: E402
from torchlens.errors import BackendUnsupportedError  # noqa: E402
from torchlens.options import CaptureOptions  # noqa: E402

pytestmark = pytest.mark.paddle


def _mlp():
    model = _fixed(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))).eval()
    return model, paddle.to_tensor([[1.0, -1.0, 0.5], [0.2, 0.3, -2.0]])


def test_the_spec_examples_run_unchanged():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = paddle.ones([1, 3], dtype="float32")
    trace = tl.trace(model, x, backend="paddle")
    assert trace.validate_forward_pass() is True
    ablated = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    partial = tl.trace(model, x, backend="paddle", stop_after=tl.func("relu"))
    assert partial.is_stopped
    (relu,) = [op for op in ablated.ops if op.func_name == "relu"]
    assert relu.is_edited and not np.any(relu.out.numpy())
    np.testing.assert_allclose(ablated.outputs[0].out.numpy(), model[2].bias.numpy()[None, :], rtol=1e-6)
    assert ablated.validate_forward_pass() is True


def test_a_zero_ablation_equals_the_hand_made_edit_and_keeps_the_op_identity():
    model, x = _mlp()
    plain = tl.trace(model, x, backend="paddle")
    edited = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    assert edited.labels == plain.labels  # hook internals never appear as ops
    relu = edited["relu_1_3"]
    assert relu.is_edited and [record.helper_name for record in relu.fire_records] == ["zero_ablate"]
    assert relu.fire_records[0].timing == "post" and relu.fire_records[0].target_label == "relu_1_3"
    hand = model[2](paddle.zeros_like(model[1](model[0](x))))
    np.testing.assert_allclose(edited.outputs[0].out.numpy(), hand.numpy(), rtol=1e-6)
    assert not any(op.is_edited for op in plain.ops)


def test_callable_predicates_and_actions_equal_hand_made_edits():
    model, x = _fixed(Residual()).eval(), _input(2, 6)
    seen = []

    def predicate(context):
        seen.append(context)
        return context.func_name == "linear" and context.address == "fc2"

    edited = tl.trace(
        model, x, backend="paddle", intervene=tl.when(predicate, lambda value: value * 0.5 + 1.0)
    )
    hand = F.relu(x + (model.fc2(F.relu(model.fc1(x))) * 0.5 + 1.0))
    np.testing.assert_allclose(edited.outputs[0].out.numpy(), hand.numpy(), rtol=1e-5, atol=1e-6)
    assert [op.label for op in edited.ops if op.is_edited] == ["linear_2_4"]
    assert edited.validate_forward_pass() is True
    first = seen[0]
    assert first.func_name == "linear" and first.shape == (2, 6) and first.dtype == "float32"
    assert first.is_scalar_bool is False and first.bool_value is None
    assert first.tensor_requires_grad is True  # computed from trainable weights


def test_a_value_dependent_predicate_reads_the_concrete_value():
    def fn(x):
        flag = (x.sum() > 0).astype("bool")
        return x * 2, flag

    contexts = []

    def on_scalar_bools(context):
        contexts.append(context)
        return bool(context.is_scalar_bool and context.bool_value)

    trace = tl.trace(fn, paddle.ones([3]), backend="paddle", intervene=tl.when(on_scalar_bools, lambda v: ~v))
    # (astype to the same dtype hands back the tensor itself: one scalar bool op)
    assert [c.bool_value for c in contexts if c.is_scalar_bool] == [True]
    assert trace.outputs[1].out.numpy().item() is False


def test_stop_after_leaves_later_code_unexecuted():
    ran = []

    class Tail(nn.Layer):
        def forward(self, x):
            ran.append("tail")
            return x * 3

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), Tail())
    x = paddle.ones([1, 3])
    partial = tl.trace(model, x, backend="paddle", stop_after=tl.func("relu"))
    assert partial.is_stopped and partial.stop_reason
    assert ran == [] and [op.func_name for op in partial.ops] == ["input", "linear", "relu"]
    assert open_session_count() == 0 and paddle.nn.Layer.__call__.__name__ == "__call__"
    assert partial.validate_forward_pass() is True
    by_value = tl.trace(model, x, backend="paddle", stop_after=lambda context: context.func_name == "relu")
    assert by_value.is_stopped and ran == []
    full = tl.trace(model, x, backend="paddle")
    assert ran == ["tail"] and not full.is_stopped


def test_module_rules_fire_once_at_the_call_exit_and_unions_work():
    model, x = _mlp()
    edited = tl.trace(
        model, x, backend="paddle", intervene=tl.when(tl.module("0") | tl.module("2"), tl.scale(2.0))
    )
    assert [op.label for op in edited.ops if op.is_edited] == ["linear_1_2", "linear_2_4"]
    assert all(len(op.fire_records) == 1 for op in edited.ops if op.is_edited)
    hand = model[2](model[1](model[0](x) * 2.0)) * 2.0
    np.testing.assert_allclose(edited.outputs[0].out.numpy(), hand.numpy(), rtol=1e-6)
    assert edited.validate_forward_pass() is True
    stopped = tl.trace(model, x, backend="paddle", stop_after=tl.module("1"))
    assert stopped.is_stopped and [op.func_name for op in stopped.ops] == ["input", "linear", "relu"]


def test_every_native_action_applies_live():
    model, x = _mlp()
    replacement = np.full((2, 4), 0.25, dtype="float32")
    for action, expected in (
        (tl.scale(3.0), lambda h: h * 3.0),
        (tl.add(1.5), lambda h: h + 1.5),
        (tl.replace_with(replacement), lambda h: replacement),
        (tl.replace_with(paddle.to_tensor(replacement)), lambda h: replacement),
    ):
        edited = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), action))
        hidden = model[1](model[0](x)).numpy()
        np.testing.assert_allclose(edited["relu_1_3"].out.numpy(), expected(hidden), rtol=1e-6)
        assert edited.validate_forward_pass() is True


def test_stripped_or_forged_edit_declarations_fail_validation():
    model, x = _mlp()
    stripped = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    value_id = stripped["relu_1_3"]._info["value"]
    stripped._runtime.edits.pop(value_id)  # the replacement now claims to be what relu computed
    status = stripped.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == "relu_1_3"
    forged = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    linear = forged["linear_2_4"]._info["value"]
    relu_entry = forged._runtime.edits[forged["relu_1_3"]._info["value"]]
    forged._runtime.edits[linear] = (relu_entry[0], forged["linear_2_4"].out)  # an edit that never fired
    from torchlens.adapter_kit.replay import edited_call
    from torchlens.backends.paddle.edits import apply_natively

    def output_of(result, index):  # as the kit's live edits pick an op's output
        return result if index is None else forged._backend.output_leaves(result)[index]

    record = forged._runtime.records[linear]
    record.call = edited_call(
        forged._runtime, linear, record.call, record.output_index, forged._backend, apply_natively, output_of
    )
    assert forged.validation_replay_status.state == "failed"
    changed = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    changed["relu_1_3"].out.set_value(np.ones((2, 4), dtype="float32"))
    assert changed.validation_replay_status.state == "failed"


def test_facets_pass_through():
    model, x = _mlp()
    trace = tl.trace(model, x, backend="paddle", facets={"note": "kept"}, stop_after=tl.func("linear"))
    assert trace.facets == {"note": "kept"}


REFUSED = {
    "mixed_module_selector": lambda m, x: tl.trace(
        m, x, backend="paddle", intervene=tl.when(tl.module("0") | tl.func("relu"), tl.zero_ablate())
    ),
    "followed_by_unsupported": lambda m, x: tl.trace(
        m, x, backend="paddle", stop_after=tl.followed_by(tl.func("linear"), tl.func("relu"))
    ),
    "edit_action_unsupported": lambda m, x: tl.trace(
        m, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.clamp(min=0.0))
    ),
    "option_unsupported": lambda m, x: tl.trace(
        m,
        x,
        backend="paddle",
        stop_after=tl.func("relu"),
        capture=CaptureOptions(grad_options=tl.backends.paddle.GradOptions()),
    ),
}


@pytest.mark.parametrize("code", sorted(REFUSED))
def test_unsupported_edit_requests_refuse_before_the_model_runs(code):
    model = Counting()
    with pytest.raises(BackendUnsupportedError) as caught:
        REFUSED[code](model, paddle.ones([1, 3]))
    assert caught.value.code == code and caught.value.remedy and model.calls == 0
    assert open_session_count() == 0


def test_gradient_site_interventions_refuse():
    model, x = _mlp()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            model,
            x,
            backend="paddle",
            intervene=tl.when(tl.func("relu"), tl.zero_ablate(), direction="backward"),
        )
    assert caught.value.code == "gradient_site_intervention_unsupported"


def test_label_composite_and_stacked_rules_on_an_lstm():
    from conformance.models.paddle import battery

    _, model, x = battery()[2]
    by_label = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.label("rnn_1_5"), tl.scale(0.0)))
    assert [op.label for op in by_label.ops if op.is_edited] == ["rnn_1_5"]
    assert not np.any(by_label["rnn_1_5"].out.numpy())
    mixed = tl.trace(
        model,
        x,
        backend="paddle",
        intervene=tl.when(tl.in_module("head") & tl.where(lambda c: c.shape == (2, 2)), tl.add(1.0)),
    )
    assert [op.func_name for op in mixed.ops if op.is_edited] == ["linear"]
    stacked = tl.trace(
        model,
        x,
        backend="paddle",
        intervene=[tl.when(tl.func("rnn"), tl.scale(2.0)), tl.when(tl.func("rnn"), tl.add(1.0))],
    )
    plain = tl.trace(model, x, backend="paddle")
    for op in stacked.ops:
        if op.func_name == "rnn":
            assert [record.helper_name for record in op.fire_records] == ["scale(2.0)", "add(1.0)"]
            np.testing.assert_allclose(op.out.numpy(), plain[op.label].out.numpy() * 2.0 + 1.0, rtol=1e-5)
    for trace in (by_label, mixed, stacked):
        assert trace.validate_forward_pass() is True
    stopped = tl.trace(model, x, backend="paddle", stop_after=tl.label("rnn_1_5"), save=tl.func("rnn"))
    assert stopped.is_stopped and [op.func_name for op in stopped.saved_ops] == ["rnn"] * 3


def test_edited_and_stopped_traces_round_trip_through_tlspec(tmp_path):
    model, x = _mlp()
    edited = tl.trace(model, x, backend="paddle", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    edited.save(str(tmp_path / "edited.tlspec"))
    loaded = tl.load(str(tmp_path / "edited.tlspec"))
    assert [op.label for op in loaded.ops if op.is_edited] == ["relu_1_3"]
    assert not np.any(loaded["relu_1_3"].out.numpy())
    stopped = tl.trace(model, x, backend="paddle", stop_after=tl.func("relu"))
    stopped.save(str(tmp_path / "stopped.tlspec"))
    again = tl.load(str(tmp_path / "stopped.tlspec"))
    assert again.is_stopped and again.labels == stopped.labels
