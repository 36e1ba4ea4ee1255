"""tl.trace on torch models: structure, labels, and saved values equal to what the model computed
(checked against values captured independently with torch's own forward hooks)."""

from __future__ import annotations

import pytest
import torch
from cleanup_checks import nothing_installed
from torch.overrides import TorchFunctionMode

import torchlens as tl
from conformance.models.torch import DictModel, Loop, Raises, SharedModule, battery

pytestmark = pytest.mark.torch

BATTERY = battery()


class _InertMode(TorchFunctionMode):
    """Does nothing but be active. Some torch modules (MultiheadAttention in eval) pick a fused
    kernel only when no function mode is active; under this mode the independent run takes the
    same kernels as the traced run, so values compare bit for bit."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def module_outputs(model, x):
    """Every module call's output tensors, captured independently with forward hooks."""
    outputs = []
    handles = []
    for name, module in model.named_modules():

        def hook(module, args, output, name=name or "self"):
            tensors = (
                [output]
                if isinstance(output, torch.Tensor)
                else [
                    item
                    for item in (output if isinstance(output, (tuple, list)) else ())
                    if isinstance(item, torch.Tensor)
                ]
            )
            outputs.append((name, [tensor.detach().clone() for tensor in tensors]))

        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad(), _InertMode():
            result = model(x)
    finally:
        for handle in handles:
            handle.remove()
    return outputs, result


@pytest.mark.parametrize("name,model,x", BATTERY, ids=[entry[0] for entry in BATTERY])
def test_every_saved_value_equals_what_the_model_computed(name, model, x):
    expected_outputs, expected_result = module_outputs(model, x)
    with torch.no_grad():
        trace = tl.trace(model, x)
    assert trace.capture_verified, trace.capture_reason
    # The model output.
    assert torch.equal(trace.outputs[0].out, expected_result)
    # Every module call's output, in call order, equals the op the trace says the call returned.
    modules = trace.modules
    for address, _value in expected_outputs:
        if address == "self":
            continue
        assert address in modules or any(address in m.all_addresses for m in modules.values()), address
    # Every module call's tensor outputs, in call order, are the ops the trace says the call
    # returned, with the same values; a call the trace cannot match fails.
    checked = 0
    for module in modules.values():
        calls = module.calls
        values = [tensors for address, tensors in expected_outputs if address in module.all_addresses]
        assert len(values) == len(calls), (
            f"{name}: {module.address} ran {len(values)} times, trace has {calls}"
        )
        for call_name, tensors in zip(calls, values):
            matches = trace.select(tl.module(call_name))
            assert len(matches) == len(tensors), (
                f"{name}: {call_name} returned {len(tensors)}, trace: {matches}"
            )
            for op, tensor in zip(matches, tensors):
                assert torch.equal(op.out, tensor), f"{name}: {call_name} {op.label}"
            checked += 1
    assert checked > 0
    # Every op that is not a boundary node has a value of the recorded shape and dtype.
    for op in trace.ops:
        if op.kind in ("compute", "literal_producer"):
            assert op.out is not None, op
            assert tuple(op.out.shape) == op.shape, op
            assert op.source is not None and op.source[1] > 0, op


def test_mlp_labels_modules_params_and_selectors():
    model, x = BATTERY[0][1], BATTERY[0][2]
    trace = tl.trace(model, x)
    assert trace.labels == ["input_1", "linear_1_2", "relu_1_3", "linear_2_4", "output_1"]
    relu = trace["relu_1_3"]
    assert relu.func_name == "relu" and relu.module == "act:1"
    assert trace[2] is relu
    assert torch.equal(relu.out, torch.relu(trace["linear_1_2"].out))
    assert relu.parents[0].label == "linear_1_2"
    assert trace["linear_1_2"].params == ["fc1.weight", "fc1.bias"]
    assert set(trace.params) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert trace.modules["fc1"].class_name == "Linear"
    assert [op.label for op in trace.select(tl.func("linear") & ~tl.in_module("fc2"))] == ["linear_1_2"]
    assert [op.label for op in trace.select(tl.func("relu") | tl.module("fc2"))] == ["relu_1_3", "linear_2_4"]
    assert [op.label for op in trace.select(tl.label_contains("LINEAR_2"))] == ["linear_2_4"]
    assert "relu_1_3" in trace.summary()
    with pytest.raises(tl.errors.NotFoundError):
        trace["nope_1_1"]


def test_loop_groups_passes_and_recurrence_off_does_not():
    model, x = Loop().eval(), torch.randn(3, 6)
    trace = tl.trace(model, x)
    tanh = [op for op in trace.ops if op.func_name == "tanh"]
    assert [op.label for op in tanh] == [f"tanh_1_3:{n}" for n in range(1, 6)]
    assert [op.pass_number for op in tanh] == [1, 2, 3, 4, 5]
    assert trace.modules["cell"].num_calls == 5
    assert len(trace.select(tl.label("tanh_1_3"))) == 5
    assert trace["tanh_1_3:4"].module == "self"
    expected = x
    for op in tanh:
        expected = torch.tanh(model.cell(expected))
        assert torch.allclose(op.out, expected)
    flat = tl.trace(model, x, capture=tl.options.CaptureOptions(recurrence_detection=False))
    assert not any(":" in label for label in flat.labels)
    assert len([label for label in flat.labels if label.startswith("tanh")]) == 5


def test_shared_modules_and_containers():
    trace = tl.trace(SharedModule().eval(), torch.randn(2, 5))
    shared = trace.modules["first"]
    assert shared.all_addresses == ["first", "second"]
    assert shared.num_calls == 2
    assert trace.modules["blocks"].is_container
    assert trace.modules["blocks.1"].num_calls == 1
    linear = [op for op in trace.ops if op.func_name == "linear"]
    assert linear[0].label.endswith(":1") and linear[1].label.endswith(":2")


def test_global_tensor_is_a_constant_parent():
    from conformance.models.torch import GLOBAL_OFFSET, ReadsGlobal

    trace = tl.trace(ReadsGlobal().eval(), torch.randn(2, 4))
    constant = [op for op in trace.ops if op.is_constant]
    assert len(constant) == 1 and constant[0].parents == []
    assert torch.equal(constant[0].out, GLOBAL_OFFSET)
    add = [op for op in trace.ops if op.op_type == "add"][0]
    assert constant[0].label in [parent.label for parent in add.parents]


def test_in_place_ops_keep_each_value():
    from conformance.models.torch import InPlace

    model, x = InPlace().eval(), torch.randn(2, 4)
    trace = tl.trace(model, x)
    linear = trace.select(tl.func("linear"))[0]
    added = [op for op in trace.ops if op.func_name == "add_"][0]
    relu = [op for op in trace.ops if op.func_name == "relu_"][0]
    assert added.in_place and relu.in_place
    expected = model.fc(x)
    assert torch.allclose(linear.out, expected)
    assert torch.allclose(added.out, expected + 1)
    assert torch.allclose(relu.out, torch.relu(expected + 1))
    assert relu.parents[0].label == added.label


def test_dict_inputs_and_outputs():
    model = DictModel().eval()
    batch = {"image": torch.randn(2, 4), "text": torch.randn(2, 2)}
    trace = tl.trace(model, batch)
    names = [op._info["name"] for op in trace.inputs]
    assert names == ["batch.image", "batch.text"]
    outputs = {op._info["name"]: op for op in trace.outputs}
    assert set(outputs) == {"output.joint", "output.image"}
    expected = model(batch)
    assert torch.equal(outputs["output.joint"].out, expected["joint"])


def test_keyword_inputs_train_mode_and_no_grad():
    model = SmallCnnTrain()
    x, scale = torch.randn(2, 3, 8, 8), torch.tensor(3.0)
    trace = tl.trace(model, x, {"scale": scale})
    assert [op._info["name"] for op in trace.inputs] == ["x", "scale"]
    assert trace.inputs[1].out is not None and torch.equal(trace.inputs[1].out, scale)
    multiply = trace.select(tl.func("__mul__"))[0]
    assert trace.inputs[1].label in [parent.label for parent in multiply.parents]
    assert trace.modules["bn"].training
    with torch.no_grad():
        quiet = tl.trace(model.eval(), x, kwargs={"scale": scale})
        expected = model(x, scale=scale)
    assert not quiet.modules["bn"].training
    assert torch.equal(quiet.outputs[0].out, expected)


class SmallCnnTrain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x, scale=1.0):
        return self.bn(self.conv(x)) * scale


class Interrupted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x):
        self.fc(x)
        raise KeyboardInterrupt


@pytest.mark.parametrize("model_class,error", [(Raises, RuntimeError), (Interrupted, KeyboardInterrupt)])
def test_an_exception_inside_forward_leaves_nothing_installed(model_class, error):
    from torchlens.adapter_kit.session import open_session_count

    model, x = model_class(), torch.randn(2, 3)
    with pytest.raises(error):
        tl.trace(model, x)
    nothing_installed(model, x)
    assert open_session_count() == 0
    # And the next capture works.
    trace = tl.trace(BATTERY[0][1], BATTERY[0][2])
    assert len(trace) == 5


def test_a_successful_trace_leaves_nothing_installed():
    model, x = BATTERY[0][1], BATTERY[0][2]
    tl.trace(model, x)
    nothing_installed(model, x)


def test_plain_functions_trace_too():
    def fn(x):
        return torch.sigmoid(x * 2)

    x = torch.randn(3)
    trace = tl.trace(fn, x)
    assert [op.func_name for op in trace.ops] == ["input", "mul", "sigmoid", "output"]
    assert [op.op_type for op in trace.ops] == ["input", "mul", "sigmoid", "output"]
    assert torch.equal(trace.outputs[0].out, fn(x))


def test_a_selector_that_matches_nothing_warns():
    model, x = BATTERY[0][1], BATTERY[0][2]
    with pytest.warns(tl.errors.SelectorMatchedNothingWarning):
        trace = tl.trace(model, x, save=tl.func("conv2d"))
    assert trace.saved_ops == []
    with pytest.warns(tl.errors.SelectorMatchedNothingWarning):
        assert trace.select(tl.label("nothing_1_1")) == []


class FactoryAndKwargs(torch.nn.Module):
    def forward(self, x, bias=None, *, gate):
        ones = torch.ones(x.shape[-1])
        steps = torch.arange(x.shape[-1], dtype=x.dtype)
        y = x * ones + steps + bias
        return y * gate, y.sum()


def test_literal_producers_keyword_inputs_and_tuple_outputs():
    model = FactoryAndKwargs()
    x, bias, gate = torch.randn(2, 3), torch.randn(3), torch.rand(2, 3)
    trace = tl.trace(model, (x,), kwargs={"bias": bias, "gate": gate})
    ones = trace.select(tl.func("ones"))[0]
    assert ones.kind == "literal_producer" and ones.parents == []
    assert torch.equal(ones.out, torch.ones(3))
    assert trace.select(tl.func("arange"))[0].kind == "literal_producer"
    assert [op._info["name"] for op in trace.inputs] == ["x", "bias", "gate"]
    outputs = trace.outputs
    assert [op._info["name"] for op in outputs] == ["output.0", "output.1"]
    expected = model(x, bias, gate=gate)
    assert torch.equal(outputs[0].out, expected[0]) and torch.equal(outputs[1].out, expected[1])


def test_a_narrow_save_keeps_values_from_before_later_in_place_ops():
    from conformance.models.torch import InPlace

    model, x = InPlace().eval(), torch.randn(2, 4)
    trace = tl.trace(model, x, save=tl.func("linear") | tl.func("add_"))
    assert [op.func_name for op in trace.saved_ops] == ["linear", "add_"]
    expected = model.fc(x)
    assert torch.allclose(trace.saved_ops[0].out, expected)
    assert torch.allclose(trace.saved_ops[1].out, expected + 1)


def test_a_narrow_save_is_not_fooled_by_inplace_keyword_ops():
    class InplaceRelu(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.act = torch.nn.ReLU(inplace=True)

        def forward(self, x):
            return self.act(self.fc(x))

    model, x = InplaceRelu().eval(), torch.randn(8, 4)
    trace = tl.trace(model, x, save=tl.func("linear"))
    assert torch.allclose(trace.saved_ops[0].out, model.fc(x))
    assert trace.select(tl.func("relu"))[0].in_place


def test_a_saved_value_changed_after_the_capture_is_refused_not_served(tmp_path):
    model, x = BATTERY[0][1], BATTERY[0][2]
    trace = tl.trace(model, x)
    before = trace.outputs[0].out.clone()
    returned = trace.outputs[0].out  # the model's own tensor: kept without a copy
    returned.add_(1.0)  # the caller changes what the model returned
    with pytest.raises(tl.errors.PayloadModifiedError) as caught:
        _ = trace.outputs[0].out
    assert caught.value.code == "payload_modified_after_capture"
    with pytest.raises(tl.errors.PayloadModifiedError):
        trace.save(str(tmp_path / "t.tlspec"))
    returned.sub_(1.0)
    # Undoing the change does not make the value trustworthy again: the counter moved on.
    with pytest.raises(tl.errors.PayloadModifiedError):
        _ = trace.outputs[0].out
    # Values other ops computed are untouched, and the refused value was the model's output.
    assert torch.equal(trace["relu_1_3"].out, torch.relu(trace["linear_1_2"].out))
    with torch.no_grad():
        assert torch.equal(before, model(x))


class ReadsGlobalBetweenLayers(torch.nn.Module):
    """Reads a module-level tensor between two layers: a constant op enters the trace in the
    middle of the ops a narrow save= selects."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 4)
        self.fc2 = torch.nn.Linear(4, 4)

    def forward(self, x):
        from conformance.models.torch import GLOBAL_OFFSET

        return self.fc2(torch.relu(self.fc1(x) + GLOBAL_OFFSET))


def test_a_constant_read_mid_forward_does_not_shift_which_values_a_narrow_save_keeps():
    from conformance.models.torch import GLOBAL_OFFSET

    model, x = ReadsGlobalBetweenLayers().eval(), torch.randn(2, 4)
    trace = tl.trace(model, x, save=tl.func("relu") | tl.module("fc2"))
    constant = [op for op in trace.ops if op.is_constant]
    assert len(constant) == 1
    assert [op.label for op in trace.saved_ops] == [constant[0].label, "relu_1_5", "linear_2_6"]
    with torch.no_grad():
        hidden = torch.relu(model.fc1(x) + GLOBAL_OFFSET)
        assert torch.equal(constant[0].out, GLOBAL_OFFSET)
        assert torch.equal(trace["relu_1_5"].out, hidden)
        assert torch.equal(trace["linear_2_6"].out, model.fc2(hidden))


class KeepsACache(torch.nn.Module):
    """Keeps an intermediate tensor between calls and reads it in the next call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.cache = None

    def forward(self, x):
        hidden = torch.tanh(self.fc(x))
        out = hidden if self.cache is None else hidden + self.cache
        self.cache = hidden * 2
        return out


def test_a_tensor_kept_from_an_earlier_capture_is_a_constant_not_a_stale_id():
    model, x = KeepsACache().eval(), torch.randn(2, 3)
    tl.trace(model, x)
    cached = model.cache.detach().clone()
    second = tl.trace(model, x)
    add = second.select(tl.func("__add__"))[0]
    constant = [parent for parent in add.parents if parent.is_constant]
    assert len(constant) == 1, [parent.label for parent in add.parents]
    assert torch.equal(constant[0].out, cached)
    assert [parent.func_name for parent in add.parents] == ["tanh", "constant"]


def test_a_trace_under_inference_mode_keeps_copies_of_inference_tensors():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    with torch.inference_mode():
        x = torch.randn(2, 3)
        trace = tl.trace(model, x)
        expected = model(x)
    assert torch.equal(trace.outputs[0].out, expected)
    assert trace.validate_forward_pass() is True


class _CallSites(torch.nn.Module):
    """Ops reached through torch's own frames (nn.Linear's forward, F.layer_norm's Python
    dispatch) and ops called directly: each op's source is the line of this file that called it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        hidden = self.fc(x)  # call site: linear
        hidden = self.norm(hidden)  # call site: layer_norm
        return torch.relu(hidden)  # call site: relu


def test_sources_name_the_users_line_through_torch_frames():
    import inspect

    lines, first = inspect.getsourcelines(_CallSites.forward)
    expected = {
        name: first + index
        for index, line in enumerate(lines)
        for name in ("linear", "layer_norm", "relu")
        if f"call site: {name}" in line
    }
    model = _CallSites()
    for _ in range(2):  # the second capture reads the locator's per-code cache
        trace = tl.trace(model, torch.randn(2, 4))
        for name, line in expected.items():
            (op,) = [op for op in trace.ops if op.func_name == name]
            assert op.source == (__file__, line, "forward"), (name, op.source)


class _ChangesWhatItReads(torch.nn.Module):
    """A batch norm in training (its forward bumps ``num_batches_tracked`` with ``add_``, and
    ``F.batch_norm`` updates the running statistics in place right after reading them), and a
    plain tensor attribute (a constant to the trace) bumped in place."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(4)
        self.steps = torch.zeros(())

    def forward(self, x):
        self.steps.add_(1)
        return self.norm(x) * self.steps


@pytest.mark.parametrize("path", ["one-call path", "python path"])
@pytest.mark.parametrize("save", [True, "mul"], ids=["every value saved", "a narrow save"])
def test_a_buffer_or_constant_an_op_changes_is_saved_as_the_op_read_it(path, save, monkeypatch):
    """Buffers and constants are saved with every value and under a narrow ``save=`` (replay reads
    them as leaves); the value saved is the one the op read, not what the op left in the tensor."""
    if save == "mul":
        save = tl.func("mul")
    from torchlens.backends.torch.capture import Capture

    if path == "python path":
        monkeypatch.setattr(Capture, "_held_recorder", lambda capture: None)
    torch.manual_seed(0)
    model = _ChangesWhatItReads().train()
    read = [model.steps.clone(), *(buffer.clone() for buffer in model.norm.buffers())]
    trace = tl.trace(model, torch.randn(8, 4), save=save)
    leaves = [op for op in trace.ops if op.kind in ("constant", "buffer")]
    assert [op.kind for op in leaves] == ["constant", "buffer", "buffer", "buffer"]
    # Read in this order: steps by add_, num_batches_tracked by add_, then the running statistics.
    expected = [read[0], read[3], read[1], read[2]]
    assert all(torch.equal(op.value, value) for op, value in zip(leaves, expected)), [
        op.value for op in leaves
    ]
    assert float(model.steps) == 1.0 and int(model.norm.num_batches_tracked) == 1
    assert not torch.equal(model.norm.running_mean, read[1])


def test_a_meta_device_trace_validates_as_unavailable_not_failed():
    # Meta tensors carry shapes and dtypes only: nothing was wrong, there is nothing to replay.
    layers = torch.nn
    model = layers.Sequential(layers.Linear(3, 4), layers.ReLU(), layers.Linear(4, 2)).to("meta")
    trace = tl.trace(model, torch.randn(2, 3, device="meta"))
    assert [list(op.shape) for op in trace.outputs] == [[2, 2]]
    status = trace.validate_forward_pass()
    assert status.state == "unavailable" and status.reason == "values_not_materialized"
    assert trace.validation_replay_status.state == "unavailable"
