"""Live edits, early stop, value-dependent and temporal save= and editing a finished trace, on
torch: every result is compared with the same thing done by hand (forward hooks, a plain loop
over a full trace), on a battery of small models."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import torchlens as tl
from conformance.models.torch import Counting, InPlace, Mlp, ProjectedAttention, Recurrent, Residual, Shared
from torchlens.errors import BackendUnsupportedError, PatchError, UnsupportedError

pytestmark = pytest.mark.torch


def _battery():
    torch.manual_seed(0)
    return {
        "mlp": (Mlp(6, 8, 3), torch.randn(2, 6), "act"),
        "cnn": (
            nn.Sequential(
                nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2)
            ).eval(),
            torch.randn(2, 3, 6, 6),
            "0",
        ),
        "residual": (Residual(), torch.randn(1, 4, 5, 5), "conv1"),
        "attention": (ProjectedAttention(residual_norm=False), torch.randn(2, 4, 8), "v"),
        "shared": (Shared(6, nn.Tanh, classes=2), torch.randn(3, 6), "block"),
        "lstm": (Recurrent(), torch.randn(2, 4, 5), "lstm"),
    }


BATTERY = _battery()


def _fill(value):
    return torch.full_like(value, value.float().mean().item())


#: (action, the same edit written by hand on a tensor)
ACTIONS = {
    "zero_ablate": (tl.zero_ablate(), torch.zeros_like),
    "scale": (tl.scale(0.5), lambda value: value * 0.5),
    "add_scalar": (tl.add(1.25), lambda value: value + 1.25),
    "clamp": (tl.clamp(min=-0.1, max=0.2), lambda value: value.clamp(-0.1, 0.2)),
    "mean_ablate": (tl.mean_ablate(), _fill),
    "mean_ablate_dim": (
        tl.mean_ablate(dim=-1),
        lambda value: value.mean(dim=-1, keepdim=True).expand(value.shape),
    ),
    "replace_with": (tl.replace_with(torch.tensor(0.25)), lambda value: torch.full_like(value, 0.25)),
    "callable": (lambda value: value * 3 - 1, lambda value: value * 3 - 1),
    "callable_with_context": (
        lambda value, ctx: value * len(ctx.shape),
        lambda value: value * value.dim(),
    ),
}


def _by_hand(model, x, address, edit):
    """The model's output with ``edit`` applied to every tensor the module at ``address``
    returns, on every call, through a forward hook."""
    module = model.get_submodule(address)

    def hook(_module, _args, output):
        if isinstance(output, torch.Tensor):
            return edit(output)
        return tuple(
            edit(item) if isinstance(item, torch.Tensor) else tuple(edit(inner) for inner in item)
            for item in output
        )

    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return model(x)
    finally:
        handle.remove()


@pytest.mark.parametrize("action_name", sorted(ACTIONS))
@pytest.mark.parametrize("model_name", sorted(BATTERY))
def test_every_action_equals_the_same_edit_by_hand(model_name, action_name):
    model, x, address = BATTERY[model_name]
    action, by_hand = ACTIONS[action_name]
    trace = tl.trace(model, x, intervene=tl.when(tl.module(address), action))
    expected = _by_hand(model, x, address, by_hand)
    assert torch.allclose(trace.outputs[0].out, expected, atol=1e-6)
    edited = [op for op in trace.ops if op.is_edited]
    assert edited, "the rule fired on no op"
    record = edited[0].fire_records[0]
    assert record.target_label == edited[0].label and record.timing == "post"
    assert edited[0].edits == edited[0].fire_records == edited[0].interventions
    # The edited op keeps its identity: the same labels as an unedited run.
    assert trace.labels == tl.trace(model, x).labels


def test_function_rules_edit_the_op_and_flow_downstream():
    model, x, _ = BATTERY["mlp"]
    trace = tl.trace(model, x, intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    assert torch.equal(trace["relu_1_3"].out, torch.zeros(2, 8))
    expected = model.fc2.bias.detach().expand(2, 3)
    assert torch.allclose(trace.outputs[0].out, expected)
    assert [op.label for op in trace.ops if op.is_edited] == ["relu_1_3"]
    assert trace.validate_forward_pass() is True


def test_rules_apply_in_order_and_value_dependent_conditions_see_the_value():
    model, x, _ = BATTERY["mlp"]
    rules = [
        tl.when(tl.func("relu"), tl.add(1.0)),
        tl.when(
            tl.where(lambda ctx: ctx.func_name == "relu" and float(ctx.value.min()) >= 1.0), tl.scale(2.0)
        ),
    ]
    trace = tl.trace(model, x, intervene=rules)
    relu = torch.relu(model.fc1(x))
    assert torch.allclose(trace["relu_1_3"].out, (relu + 1.0) * 2.0)
    assert [record.helper_name for record in trace["relu_1_3"].fire_records] == ["add(1.0)", "scale(2.0)"]


def test_in_place_ops_are_edited_in_the_object_the_model_keeps():
    model, x = InPlace(), torch.randn(3, 4)  # fc, add_(1), relu_, *= 2, all in place
    trace = tl.trace(model, x, intervene=tl.when(tl.func("relu_"), tl.add(1.0)))
    with torch.no_grad():
        expected = (torch.relu(model.fc(x) + 1.0) + 1.0) * 2
    assert torch.allclose(trace.outputs[0].out, expected)
    assert trace.validate_forward_pass() is True


def test_a_shape_changing_replacement_refuses():
    model, x, _ = BATTERY["mlp"]
    with pytest.raises(UnsupportedError) as raised:
        tl.trace(model, x, intervene=tl.when(tl.func("relu"), lambda value: value[:, :2]))
    assert raised.value.code == "edit_shape_changed"
    with pytest.raises(UnsupportedError):
        tl.zero_ablate(force_shape_change=True)
    with pytest.raises(UnsupportedError) as raised:
        tl.trace(model, x, intervene=tl.when(tl.func("relu"), lambda value: value.double()))
    assert raised.value.code == "edit_dtype_changed"
    scaled = tl.trace(model, x.double().float(), intervene=tl.when(tl.func("relu"), tl.scale(2)))
    assert scaled["relu_1_3"].out.dtype == torch.float32  # a built-in action keeps the dtype


def test_stop_after_leaves_the_rest_of_the_forward_unexecuted():
    effects = []

    class SideEffect(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 2)

        def forward(self, x):
            hidden = torch.relu(self.first(x))
            effects.append("after relu")
            return self.second(hidden)

    model, x = SideEffect(), torch.randn(2, 4)
    trace = tl.trace(model, x, stop_after=tl.func("relu"))
    assert effects == []
    assert trace.is_stopped and trace.stop_reason == "stop_after"
    assert trace.ops[-1].func_name == "relu"
    assert trace.ops[-1].label == "relu_1_3"
    assert torch.allclose(trace.ops[-1].out, torch.relu(model.first(x)))
    assert not trace.outputs
    by_module = tl.trace(model, x, stop_after=tl.module("first"))
    assert effects == [] and by_module.ops[-1].func_name == "linear"
    by_value = tl.trace(model, x, stop_after=tl.where(lambda ctx: ctx.func_name == "relu"))
    assert effects == [] and by_value.ops[-1].func_name == "relu"
    assert trace.validate_forward_pass() is True


def _computed(trace):
    return [op for op in trace.ops if op.kind in ("compute", "literal_producer")]


@pytest.mark.parametrize("model_name", sorted(BATTERY))
def test_value_dependent_save_keeps_exactly_what_a_hand_rule_picks(model_name):
    model, x, _ = BATTERY[model_name]
    full = tl.trace(model, x)
    wanted = [op.label for op in _computed(full) if op.out.is_floating_point() and float(op.out.mean()) > 0]
    trace = tl.trace(
        model,
        x,
        save=tl.where(lambda ctx: ctx.value.is_floating_point() and float(ctx.value.mean()) > 0),
    )
    assert [op.label for op in _computed(trace) if op.saved] == wanted
    for label in wanted:
        assert torch.equal(trace[label].out, full[label].out)
    mixed = tl.trace(
        model, x, save=tl.where(lambda ctx: float(ctx.value.float().std()) > 0.5) & ~tl.func("linear")
    )
    hand = [
        op.label
        for op in _computed(full)
        if op.func_name != "linear" and float(op.out.float().std()) > 0.5 and op.out.numel() > 1
    ]
    assert [op.label for op in _computed(mixed) if op.saved and op.out.numel() > 1] == hand


@pytest.mark.parametrize("model_name", sorted(BATTERY))
def test_temporal_save_keeps_exactly_what_a_hand_rule_picks(model_name):
    model, x, _ = BATTERY[model_name]
    full = tl.trace(model, x)
    ops = full.ops
    after = tl.trace(
        model, x, save=tl.followed_by(tl.func("linear") | tl.func("conv2d"), ~tl.func("linear"), within=2)
    )
    hand_after = [
        op.label
        for index, op in enumerate(ops)
        if op.func_name in ("linear", "conv2d")
        and any(other.func_name != "linear" for other in ops[index + 1 : index + 3])
    ]
    before = tl.trace(model, x, save=tl.preceded_by(tl.func("linear"), tl.func("relu"), within=3))
    hand_before = [
        op.label
        for index, op in enumerate(ops)
        if op.func_name == "linear"
        and any(other.func_name == "relu" for other in ops[max(0, index - 3) : index])
    ]
    assert [op.label for op in _computed(after) if op.saved] == hand_after
    assert [op.label for op in _computed(before) if op.saved] == hand_before


@pytest.mark.parametrize("model_name", sorted(BATTERY))
def test_fork_do_equals_a_fresh_intervened_run(model_name):
    model, x, address = BATTERY[model_name]
    rule = tl.when(tl.module(address), tl.scale(-0.5))
    original = tl.trace(model, x)
    before = original.outputs[0].out.clone()
    forked = original.fork().do(rule)
    fresh = tl.trace(model, x, intervene=rule)
    assert torch.equal(forked.outputs[0].out, fresh.outputs[0].out)
    assert [op.label for op in forked.ops if op.is_edited] == [op.label for op in fresh.ops if op.is_edited]
    assert torch.equal(original.outputs[0].out, before) and not any(op.is_edited for op in original.ops)
    site = original.fork().do(tl.module(address), tl.scale(-0.5))
    assert torch.equal(site.outputs[0].out, fresh.outputs[0].out)


@pytest.mark.parametrize("model_name", sorted(BATTERY))
def test_patching_every_site_from_a_clean_run_restores_the_clean_output(model_name):
    model, x, _ = BATTERY[model_name]
    clean = tl.trace(model, x)
    corrupted_input = x + torch.randn_like(x)
    corrupted = tl.trace(model, corrupted_input)
    assert not torch.allclose(corrupted.outputs[0].out, clean.outputs[0].out)
    patched = tl.trace(
        model, corrupted_input, intervene=tl.when(tl.where(lambda ctx: True), tl.patch_from(clean))
    )
    assert torch.allclose(patched.outputs[0].out, clean.outputs[0].out)
    via_fork = corrupted.fork().do(tl.where(lambda ctx: True), tl.patch_from(clean))
    assert torch.allclose(via_fork.outputs[0].out, clean.outputs[0].out)


def test_patching_refuses_a_missing_site_or_another_shape():
    model, x, _ = BATTERY["mlp"]
    other = tl.trace(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)), x)
    with pytest.raises(PatchError) as raised:
        tl.trace(model, x, intervene=tl.when(tl.func("relu"), tl.patch_from(other)))
    assert raised.value.code == "patch_site_missing"
    smaller = tl.trace(model, x[:1])
    with pytest.raises(PatchError) as raised:
        tl.trace(model, x, intervene=tl.when(tl.func("relu"), tl.patch_from(smaller)))
    assert raised.value.code == "patch_shape_mismatch"


def test_stripped_forged_or_changed_edit_declarations_fail_validation():
    model, x, _ = BATTERY["mlp"]
    rule = tl.when(tl.func("relu"), tl.zero_ablate())
    stripped = tl.trace(model, x, intervene=rule)
    stripped._runtime.edits.pop(stripped["relu_1_3"]._info["value"])
    status = stripped.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == "relu_1_3"

    changed = tl.trace(model, x, intervene=rule)
    value_id = changed["relu_1_3"]._info["value"]
    actions, original = changed._runtime.edits[value_id]
    changed._runtime.edits[value_id] = ((tl.scale(0.5),), original)  # another action than what ran
    status = changed.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == "relu_1_3"

    forged = tl.trace(model, x, intervene=rule)
    linear = forged["linear_2_4"]._info["value"]
    forged._runtime.edits[linear] = ((tl.zero_ablate(),), forged["linear_2_4"].out)  # never fired
    status = forged.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == "linear_2_4"

    edited_value = tl.trace(model, x, intervene=rule)
    edited_value["relu_1_3"].out.fill_(1.0)  # the saved (edited) value changed after the capture
    status = edited_value.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == "relu_1_3"


def test_a_stopped_or_edited_trace_validates_the_ops_it_has():
    model, x, address = BATTERY["residual"]
    stopped = tl.trace(
        model, x, stop_after=tl.func("conv2d"), intervene=tl.when(tl.func("conv2d"), tl.scale(2.0))
    )
    assert stopped.is_stopped and stopped.validate_forward_pass() is True
    edited = tl.trace(model, x, intervene=tl.when(tl.module(address), tl.clamp(min=0.0)))
    assert edited.validate_forward_pass() is True


def test_followed_by_in_a_rule_refuses_before_the_model_runs():
    model = Counting()
    with pytest.raises(BackendUnsupportedError) as raised:
        tl.trace(
            model,
            torch.ones(1, 3),
            intervene=tl.when(tl.followed_by(tl.func("relu"), tl.func("add")), tl.zero_ablate()),
        )
    assert raised.value.code == "followed_by_unsupported" and model.calls == 0


def test_torch_accepts_options_it_does_not_use():
    model, x, _ = BATTERY["mlp"]
    options = tl.options.CaptureOptions(
        module_identity_mode="function_root", payload_policy="array_payloads", jax_control_flow="region"
    )
    assert len(tl.trace(model, x, capture=options)) == len(tl.trace(model, x))


def test_a_look_back_rule_fires_on_the_op_it_selects():
    model, x, _ = BATTERY["mlp"]
    rule = tl.when(tl.preceded_by(tl.func("relu"), tl.func("linear")), tl.zero_ablate())
    trace = tl.trace(model, x, intervene=rule)
    assert [op.label for op in trace.ops if op.is_edited] == ["relu_1_3"]
    assert torch.equal(trace["relu_1_3"].out, torch.zeros(2, 8))
