"""``tl.record`` on torch: the first call for a model and input signature builds one trace and
learns a plan; later calls take the selected values from the plain forward without starting a
capture session (counted on ``CaptureSession.__init__``), and every value equals what
``tl.trace`` with the same ``save=`` keeps on the same input. A new input shape, another model
object or a module switched between train and eval gets a plan of its own; a plan the forward
no longer follows is dropped for a full trace, never served."""

from __future__ import annotations

import os
import threading

import pytest
import torch
import torch.nn as nn
from cleanup_checks import nothing_installed

import torchlens as tl
from conformance.models.torch import InPlace, Mlp, Recurrent, SharedModule, SmallCnn, TransformerBlock
from torchlens.adapter_kit import CaptureSession
from torchlens.errors import NotFoundError, SelectorError

pytestmark = pytest.mark.torch


@pytest.fixture
def sessions(monkeypatch):
    """How many capture sessions start (a counter around the real constructor)."""
    started = []
    original = CaptureSession.__init__

    def counting(self, *args, **kwargs):
        started.append(threading.get_ident())
        original(self, *args, **kwargs)

    monkeypatch.setattr(CaptureSession, "__init__", counting)
    return started


class Residual(nn.Module):
    """Two residual blocks; the second adds in place (``+=``), so a value taken before the add
    would change if it were not copied."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.block1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        self.block2 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = x + self.block1(x)
        y = self.block2(x)
        y += x
        return self.head(y.mean(dim=(2, 3)))


def _models():
    torch.manual_seed(0)
    return {
        "mlp": (Mlp().eval(), (2, 8)),
        "cnn": (SmallCnn().eval(), (2, 3, 8, 8)),
        "residual": (Residual().eval(), (2, 3, 6, 6)),
        "attention": (TransformerBlock().eval(), (2, 5, 16)),
        "shared_module": (SharedModule().eval(), (2, 5)),
        "lstm": (Recurrent(6, 12, 3, add_final_hidden=True).eval(), (2, 4, 6)),
    }


def _computed(trace, func=None):
    """Labels of the trace's computed ops (of one function, when given), in order."""
    return [op.label for op in trace.ops if op.kind == "compute" and func in (None, op.func_name)]


#: (model, selector or a function of the model's full trace giving one): every selector kind
#: on every model.
CASES = [
    ("mlp", lambda trace: tl.func("relu")),
    ("mlp", lambda trace: tl.module("fc2")),
    ("mlp", lambda trace: tl.label(_computed(trace, "linear")[1])),
    ("mlp", lambda trace: tl.in_module("fc1")),
    ("cnn", lambda trace: tl.func("conv2d") | tl.func("max_pool2d")),
    ("cnn", lambda trace: tl.module("bn2")),
    ("cnn", lambda trace: tl.in_module("head")),
    ("cnn", lambda trace: tl.in_module("bn1")),
    ("residual", lambda trace: tl.func("__iadd__") | tl.func("conv2d")),
    ("residual", lambda trace: tl.module("block1")),
    ("residual", lambda trace: tl.in_module("block2")),
    ("residual", lambda trace: tl.in_module("self")),
    # The root's own op, and a planned call inside an unplanned one inside the root's call.
    ("residual", lambda trace: tl.func("mean") | tl.in_module("block2.1")),
    ("residual", lambda trace: tl.label(_computed(trace)[-2])),
    ("attention", lambda trace: tl.module("attention")),
    ("attention", lambda trace: tl.func("layer_norm") | tl.func("gelu")),
    ("attention", lambda trace: tl.in_module("mlp")),
    ("shared_module", lambda trace: tl.module("first")),
    ("shared_module", lambda trace: tl.module("second:2")),
    ("shared_module", lambda trace: tl.in_module("blocks.1") | tl.func("linear")),
    ("lstm", lambda trace: tl.module("lstm")),
    ("lstm", lambda trace: tl.func("lstm") | tl.func("__getitem__")),
    ("lstm", lambda trace: tl.in_module("head")),
    ("lstm", lambda trace: tl.label(_computed(trace)[-1])),
]


def assert_matches_trace(recording, model, x, selector):
    """The recording holds exactly the ops ``tl.trace`` selects on the same input, with their
    names, and the same values; its output is the model's."""
    trace = tl.trace(model, x, save=selector)
    expected = [op for op in trace.select(selector) if op.kind != "output"]
    assert recording.labels == [op.label for op in expected]
    assert recording.labels, "the case selects nothing: it would show nothing"
    for op in expected:
        record = recording[op.label]
        assert (record.func_name, record.module, record.shape, record.dtype) == (
            op.func_name,
            op.module,
            op.shape,
            op.dtype,
        )
        assert torch.equal(record.out, op.out), op.label
    output = model(*x) if isinstance(x, tuple) else model(x)
    torch.testing.assert_close(recording.output, output, rtol=0, atol=0)


@pytest.mark.parametrize(
    "name, choose", CASES, ids=[f"{case[0]}-{index}" for index, case in enumerate(CASES)]
)
def test_repeat_calls_take_the_traced_values_without_a_trace(name, choose, sessions):
    model, shape = _models()[name]
    inputs = [torch.randn(shape) for _ in range(3)]
    selector = choose(tl.trace(model, inputs[0]))
    sessions.clear()
    first = tl.record(model, inputs[0], save=selector)
    assert len(sessions) == 1 and not first.from_plan
    repeats = [tl.record(model, x, save=selector) for x in inputs]
    assert len(sessions) == 1, "a repeat call with the same signature started a capture session"
    assert all(recording.from_plan for recording in repeats)
    nothing_installed(model, inputs[0])
    assert not any(module._forward_hooks or module._forward_pre_hooks for module in model.modules())
    for recording, x in zip([first, *repeats], [inputs[0], *inputs]):
        assert_matches_trace(recording, model, x, selector)


def test_a_new_input_shape_gets_a_plan_of_its_own(sessions):
    model, _ = _models()["cnn"]
    small, large = torch.randn(2, 3, 8, 8), torch.randn(1, 3, 12, 12)
    selector = tl.func("relu")
    tl.record(model, small, save=selector)
    assert len(sessions) == 1
    first_large = tl.record(model, large, save=selector)
    assert len(sessions) == 2 and not first_large.from_plan
    again_small, again_large = tl.record(model, small, save=selector), tl.record(model, large, save=selector)
    assert len(sessions) == 2 and again_small.from_plan and again_large.from_plan
    assert_matches_trace(again_large, model, large, selector)
    assert_matches_trace(again_small, model, small, selector)


def test_train_mode_another_model_or_another_selector_never_reuse_a_plan(sessions):
    model, shape = _models()["cnn"]
    x = torch.randn(shape)
    selector = tl.module("bn1")
    tl.record(model, x, save=selector)
    model.train()
    try:
        training = tl.record(model, x, save=selector)
        assert len(sessions) == 2 and not training.from_plan
        repeated = tl.record(model, x, save=selector)
        assert len(sessions) == 2 and repeated.from_plan
        # Batch statistics: what the eval plan would take is another value.
        assert_matches_trace(repeated, model, x, selector)
    finally:
        model.eval()
    sessions.clear()
    evaluated = tl.record(model, x, save=selector)
    assert not sessions and evaluated.from_plan
    assert not torch.equal(evaluated[0].out, repeated[0].out)
    assert_matches_trace(evaluated, model, x, selector)

    torch.manual_seed(1)
    other = SmallCnn().eval()
    sessions.clear()
    fresh = tl.record(other, x, save=selector)
    assert len(sessions) == 1 and not fresh.from_plan
    assert tl.record(other, x, save=selector).from_plan and len(sessions) == 1
    assert_matches_trace(tl.record(other, x, save=selector), other, x, selector)

    sessions.clear()
    narrower = tl.record(model, x, save=tl.module("bn2"))
    assert len(sessions) == 1 and not narrower.from_plan

    # A submodule swapped for another one (here wider, so later shapes change too).
    model.head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 10)).eval()
    selector = tl.func("linear")
    sessions.clear()
    swapped = tl.record(model, x, save=selector)
    assert len(sessions) == 1 and not swapped.from_plan
    assert_matches_trace(tl.record(model, x, save=selector), model, x, selector)


def _attention_model(name):
    torch.manual_seed(0)
    if name == "block":
        return TransformerBlock().eval()
    return nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()


@pytest.mark.parametrize(
    "name, selector",
    [
        ("block", tl.func("layer_norm") | tl.func("gelu")),
        ("block", tl.module("attention")),
        ("block", tl.in_module("mlp")),
        ("encoder_layer", tl.in_module("linear1") | tl.func("layer_norm")),
        ("encoder_layer", tl.module("self_attn")),
    ],
)
def test_attention_without_autograd_records_what_the_trace_computes(name, selector, sessions):
    """Under no_grad a plain forward may take torch's fused attention path (which skips the
    encoder layer's submodules), a trace (a function mode) never does: the plan holds and the
    recorded values are the trace's, bit for bit."""
    model, x = _attention_model(name), torch.randn(2, 5, 16)
    with torch.no_grad():
        tl.record(model, x, save=selector)
        recording = tl.record(model, x, save=selector)
        assert recording.from_plan and len(sessions) == 1
        trace = tl.trace(model, x, save=selector)
    assert recording.labels == [op.label for op in trace.select(selector) if op.kind != "output"]
    for record in recording:
        assert torch.equal(record.out, trace[record.label].out), record.label
    assert torch.backends.mha.get_fastpath_enabled()


class Branchy(nn.Module):
    """Which function runs depends on the input's values: the same shapes, another op."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4, bias=False)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        hidden = self.fc(x)
        hidden = torch.relu(hidden) if hidden.sum() > 0 else torch.sigmoid(hidden)
        return self.out(hidden * 2)


def test_a_plan_the_forward_no_longer_follows_is_traced_instead(sessions):
    torch.manual_seed(0)
    model = Branchy().eval()
    positive = torch.randn(3, 4)
    if model.fc(positive).sum() < 0:
        positive = -positive
    negative = -positive
    selector = tl.func("__mul__") | tl.func("relu") | tl.func("sigmoid")
    tl.record(model, positive, save=selector)
    assert tl.record(model, positive, save=selector).from_plan and len(sessions) == 1
    # The plan expects relu where sigmoid runs now: the full trace answers instead.
    switched = tl.record(model, negative, save=selector)
    assert not switched.from_plan and len(sessions) == 2
    assert [record.func_name for record in switched][0] == "sigmoid"
    assert_matches_trace(switched, model, negative, selector)
    # The relearned plan holds for that branch.
    sessions.clear()
    assert tl.record(model, negative, save=selector).from_plan and not sessions
    # A signature whose plan failed twice is traced every time from then on.
    assert not tl.record(model, positive, save=selector).from_plan
    assert not tl.record(model, positive, save=selector).from_plan
    assert len(sessions) == 2
    assert_matches_trace(tl.record(model, positive, save=selector), model, positive, selector)


def test_a_value_changed_in_place_later_is_the_value_the_op_produced(sessions):
    torch.manual_seed(0)
    model, x = InPlace().eval(), torch.randn(2, 4)
    selector = tl.func("linear") | tl.func("add_")
    tl.record(model, x, save=selector)
    recording = tl.record(model, x, save=selector)
    assert recording.from_plan and len(sessions) == 1
    with torch.no_grad():
        linear = model.fc(x)
    assert torch.equal(recording[0].out, linear)
    assert torch.equal(recording[1].out, linear + 1)
    assert_matches_trace(recording, model, x, selector)


class HiddenAlias(nn.Module):
    """``atleast_2d`` hands back its (2-D) argument itself, and the in-place add then changes the
    linear's output: a sharing the plan cannot tell from the function names."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        hidden = self.fc(x)
        torch.atleast_2d(hidden).add_(1.0)
        return hidden * 2


def test_a_value_overwritten_through_an_unknown_alias_is_learned_and_copied(sessions):
    torch.manual_seed(0)
    model, x = HiddenAlias().eval(), torch.randn(2, 4)
    selector = tl.func("linear")
    with torch.no_grad():
        linear = model.fc(x)
    tl.record(model, x, save=selector)
    # The kept value changed after it was taken: the trace answers, and the plan learns to copy.
    relearned = tl.record(model, x, save=selector)
    assert not relearned.from_plan and len(sessions) == 2
    assert torch.equal(relearned[0].out, linear)
    copied = tl.record(model, x, save=selector)
    assert copied.from_plan and len(sessions) == 2
    assert torch.equal(copied[0].out, linear)
    assert_matches_trace(copied, model, x, selector)


def test_a_constant_and_an_input_are_recorded_as_the_trace_keeps_them(sessions):
    from conformance.models.torch import GLOBAL_OFFSET, ReadsGlobal

    torch.manual_seed(0)
    model, x = ReadsGlobal().eval(), torch.randn(2, 4)
    selector = tl.in_module("self")
    tl.record(model, x, save=selector)
    recording = tl.record(model, x, save=selector)
    assert recording.from_plan and len(sessions) == 1
    kinds = [record.func_name for record in recording]
    assert kinds == ["input", "linear", "constant", "add"]
    assert torch.equal(recording[0].out, x) and torch.equal(recording[2].out, GLOBAL_OFFSET)
    assert_matches_trace(recording, model, x, selector)


ROW = torch.arange(4, dtype=torch.float32).reshape(1, 4)


def test_a_value_the_plan_cannot_find_again_is_traced_on_every_call(sessions):
    # The constant is read inside a list argument: no argument position names it alone.
    def stack(x):
        return torch.cat([x, ROW], dim=0) * 2

    x, selector = torch.randn(2, 4), tl.in_module("self")
    recordings = [tl.record(stack, x, save=selector) for _ in range(2)]
    assert not any(recording.from_plan for recording in recordings) and len(sessions) == 2
    assert "constant" in [record.func_name for record in recordings[1]]
    assert_matches_trace(recordings[1], stack, x, selector)


def test_a_plain_callable_and_keyword_inputs(sessions):
    torch.manual_seed(0)
    weight = torch.randn(4, 4)

    def function(x, *, scale):
        return torch.tanh(x @ weight) * scale

    x, scale = torch.randn(3, 4), torch.tensor(2.0)
    selector = tl.func("tanh")
    tl.record(function, x, {"scale": scale}, save=selector)
    recording = tl.record(function, x, {"scale": scale}, save=selector)
    assert recording.from_plan and len(sessions) == 1
    assert torch.equal(recording[0].out, torch.tanh(x @ weight))
    assert torch.equal(recording.output, function(x, scale=scale))


def test_the_recording_reads_like_the_reference(sessions):
    model, shape = _models()["mlp"]
    x = torch.randn(shape)
    output, recording = tl.record(model, x, save=tl.func("relu"), return_output=True)
    assert torch.equal(output, model(x))
    assert len(recording) == recording.n_records == 1
    record = recording["relu_1_3"]
    assert record is recording[0] and record.ram_payload is record.out
    assert list(recording.by_label) == recording.labels == ["relu_1_3"]
    assert "relu_1_3" in recording.summary()
    with pytest.raises(NotFoundError) as caught:
        recording["tanh_1_1"]
    assert caught.value.code == "label_not_found"


def test_a_selector_that_matches_nothing_warns_on_every_call():
    model, shape = _models()["mlp"]
    x = torch.randn(shape)
    for _ in range(2):
        with pytest.warns(tl.errors.SelectorMatchedNothingWarning):
            assert len(tl.record(model, x, save=tl.func("conv2d"))) == 0


def test_refusals_come_before_the_model_runs():
    calls = []
    model = nn.Linear(3, 3)
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    with pytest.raises(SelectorError) as missing:
        tl.record(model, torch.ones(1, 3))
    assert missing.value.code == "record_selector_missing" and missing.value.remedy
    assert calls == []


def test_value_dependent_selectors_record_through_a_full_trace(sessions):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(2, 3)
    keep = tl.where(lambda ctx: ctx.func_name == "relu")
    first, second = tl.record(model, x, save=keep), tl.record(model, x, save=keep)
    assert first.labels == second.labels == ["relu_1_3"]
    assert torch.equal(second["relu_1_3"].out, torch.relu(model[0](x)))


def test_a_forward_that_raises_leaves_nothing_installed(sessions):
    class RaisesSecondTime(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            x = torch.relu(self.fc(x))
            if self.calls > 1:
                raise RuntimeError("boom")
            return x

    model, x = RaisesSecondTime(), torch.ones(1, 3)
    tl.record(model, x, save=tl.in_module("fc") | tl.func("relu"))
    with pytest.raises(RuntimeError, match="boom"):
        tl.record(model, x, save=tl.in_module("fc") | tl.func("relu"))
    nothing_installed(model, x)
    assert not model.fc._forward_hooks and not model.fc._forward_pre_hooks


def test_the_docs_example_runs(sessions):
    from docs_tutorial import run_tutorial

    namespace, blocks = run_tutorial(os.path.join("..", "python-package.md"))
    assert blocks >= 1
    assert namespace["recording"].from_plan and len(sessions) == 1


def test_ops_in_the_models_own_hooks_count_where_the_trace_counts_them(sessions):
    torch.manual_seed(0)
    model, x = Mlp().eval(), torch.randn(2, 8)
    # The trace puts a pre-hook's ops inside the call and a forward hook's ops after it.
    model.fc1.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    model.fc1.register_forward_hook(lambda module, args, output: output + 1)
    selector = tl.in_module("fc1") | tl.func("relu") | tl.func("add")
    tl.record(model, x, save=selector)
    recording = tl.record(model, x, save=selector)
    assert recording.from_plan and len(sessions) == 1
    assert [record.func_name for record in recording] == ["mul", "linear", "add", "relu"]
    assert_matches_trace(recording, model, x, selector)


def test_a_forward_on_another_thread_neither_disturbs_nor_joins_the_recording(sessions):
    model, shape = _models()["cnn"]
    x = torch.randn(shape)
    selector = tl.in_module("bn1") | tl.func("relu")
    stop = threading.Event()

    def other_thread():
        while not stop.is_set():
            model(torch.randn(shape))

    thread = threading.Thread(target=other_thread)
    tl.record(model, x, save=selector)
    thread.start()
    try:
        recordings = [tl.record(model, x, save=selector) for _ in range(30)]
    finally:
        stop.set()
        thread.join()
    assert all(recording.from_plan for recording in recordings) and len(sessions) == 1
    for recording in recordings:
        assert_matches_trace(recording, model, x, selector)


def test_plans_go_away_with_their_model():
    import gc
    import weakref

    from torchlens.backends.torch.recording import _PLANS

    model, shape = _models()["residual"]
    selector = tl.in_module("block1") | tl.func("mean")
    for _ in range(2):
        tl.record(model, torch.randn(shape), save=selector)
    assert model in _PLANS
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


class TakesItsOwnWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, weight, x):
        return self.fc(x) @ weight


def test_a_parameter_passed_as_an_input_is_not_counted_among_the_inputs(sessions):
    torch.manual_seed(0)
    model, x = TakesItsOwnWeight().eval(), torch.randn(2, 4)
    selector = tl.in_module("self")
    tl.record(model, (model.fc.weight, x), save=selector)
    recording = tl.record(model, (model.fc.weight, x), save=selector)
    assert recording.from_plan and len(sessions) == 1
    assert recording[0].func_name == "input" and torch.equal(recording[0].out, x)
    assert_matches_trace(recording, model, (model.fc.weight, x), selector)


class Sometimes(nn.Module):
    """Calls a submodule only when a Python flag says so: a change the signature cannot see."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.use_inner = False

    def forward(self, x):
        return torch.relu(self.inner(x) if self.use_inner else x)


def test_a_nested_call_the_trace_did_not_see_is_traced_instead(sessions):
    torch.manual_seed(0)
    model, x = nn.Sequential(Sometimes()).eval(), torch.randn(2, 4)
    selector = tl.func("relu")
    tl.record(model, x, save=selector)
    assert tl.record(model, x, save=selector).from_plan and len(sessions) == 1
    model[0].use_inner = True
    changed = tl.record(model, x, save=selector)
    assert not changed.from_plan and len(sessions) == 2
    assert_matches_trace(changed, model, x, selector)
    sessions.clear()
    relearned = tl.record(model, x, save=selector)
    assert relearned.from_plan and not sessions
    assert_matches_trace(relearned, model, x, selector)
