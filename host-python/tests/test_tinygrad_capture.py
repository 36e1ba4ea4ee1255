"""The tinygrad backend on real tinygrad: the spec's examples, the battery (values against an
independent NumPy recomputation, replay validation), constants, literal producers, module
attribution, selective save and the ``.tlspec`` round trip."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad import Tensor  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.tinygrad import TinyMlp, battery, fn, input_of  # noqa: E402

pytestmark = pytest.mark.tinygrad

BATTERY = battery()


def test_the_spec_raw_function_example_runs_unchanged():
    trace = tl.trace(fn, Tensor([1.0, -2.0, 3.0]), backend="tinygrad")
    assert trace.validate_forward_pass([fn(Tensor([1.0, -2.0, 3.0]))]) is True
    assert trace.options.module_identity_mode == "function_root"
    # tinygrad 0.13 reshapes the reduction's kept axis away afterwards; 0.14 reduces to ()
    movement = ("reshape", "expand")
    assert [op.func_name for op in trace.ops if op.kind == "compute" and op.func_name not in movement] == [
        "add",
        "cmplt",
        "where",
        "mul",
        "reduce_add",
    ]
    np.testing.assert_allclose(trace.outputs[0].out.numpy(), 12.0)
    relu_input = trace.select(tl.func("add"))[0]
    np.testing.assert_allclose(relu_input.out.numpy(), [2.0, -1.0, 4.0])


def test_the_spec_module_example_runs_unchanged():
    model = TinyMlp()
    trace = tl.trace(model, Tensor.ones(1, 3), backend="tinygrad")
    assert trace.options.module_identity_mode == "object_module"
    assert trace.modules["fc"].params
    assert trace.modules["fc"].params == ["fc.weight", "fc.bias"]
    assert trace.modules["fc"].class_name == "Linear"
    assert trace.validate_forward_pass() is True
    expected = np.maximum(np.ones((1, 3)) @ model.fc.weight.numpy().T + model.fc.bias.numpy(), 0)
    np.testing.assert_allclose(trace.outputs[0].out.numpy(), expected, rtol=1e-5, atol=1e-6)
    # ops built inside fc.__call__ are attributed to it; the ReLU after it to the root
    modules = {op.func_name: op.module for op in trace.ops if op.kind == "compute"}
    assert modules["reduce_add"] == "fc:1" and modules["where"] == "self"
    readers = [op for op in trace.ops if "fc.weight" in op.params]
    assert readers and all(op.module == "fc:1" for op in readers)


def test_function_root_can_be_asked_for_a_module_object():
    from torchlens.options import CaptureOptions

    trace = tl.trace(
        TinyMlp(),
        Tensor.ones(1, 3),
        backend="tinygrad",
        capture=CaptureOptions(module_identity_mode="function_root"),
    )
    assert list(trace.modules) == ["self"]
    assert trace.options.module_identity_mode == "function_root"
    assert trace.validate_forward_pass() is True


@pytest.mark.parametrize("name,model,reference", BATTERY, ids=[entry[0] for entry in BATTERY])
def test_each_battery_model_equals_numpy_and_validates(name, model, reference):
    x = input_of(name)
    trace = tl.trace(model, Tensor(x), backend="tinygrad")
    assert trace.capture_verified
    np.testing.assert_allclose(trace.outputs[0].out.numpy(), reference(x), rtol=1e-4, atol=1e-5)
    status = trace.validation_replay_status
    assert status.state == "passed", (
        status,
        [d for d in status.decisions if d[1] not in ("passed", "leaf")][:5],
    )
    assert status.replayed == len([op for op in trace.ops if op.kind in ("compute", "literal_producer")])


def test_every_recorded_value_is_realized_once_after_the_forward():
    seen = []

    def spy(x):
        y = (x * 2).relu()
        # lazy while the forward runs: nothing is realized mid-capture
        seen.append(y.uop.op.name)
        return y + 1

    trace = tl.trace(spy, Tensor([1.0, -1.0]), backend="tinygrad")
    assert seen and seen[0] not in ("BUFFER",)
    for op in trace.ops:
        if op.saved:
            assert op.out.uop.is_realized or op.out.uop.base.is_realized


def test_a_constant_from_outside_is_a_parentless_constant_with_a_payload():
    name, model, _ = next(entry for entry in BATTERY if entry[0] == "outside_constant")
    trace = tl.trace(model, Tensor(input_of(name)), backend="tinygrad")
    constants = [op for op in trace.ops if op.kind == "constant"]
    assert len(constants) == 1 and constants[0].parents == []
    np.testing.assert_array_equal(constants[0].out.numpy(), [0.5, -1.0, 2.0, 0.25])
    assert any(constants[0].label in [parent.label for parent in op.parents] for op in trace.ops)
    decisions = dict((label, reason) for label, _, reason in trace.validation_replay_status.decisions)
    assert decisions[constants[0].label] == "constant_producer_leaf"


def test_a_literal_producer_keeps_its_name_and_has_no_parents():
    name, model, _ = next(entry for entry in BATTERY if entry[0] == "literal_producer")
    trace = tl.trace(model, Tensor(input_of(name)), backend="tinygrad")
    ones = trace.select(tl.func("ones"))
    assert len(ones) == 1 and ones[0].parents == [] and ones[0].shape == (2, 3, 4)
    np.testing.assert_array_equal(ones[0].out.numpy(), np.ones((2, 3, 4)))


def test_a_shared_layer_is_one_module_with_an_alias_and_two_calls():
    name, model, _ = next(entry for entry in BATTERY if entry[0] == "shared_layer")
    trace = tl.trace(model, Tensor(input_of(name)), backend="tinygrad")
    module = trace.modules["fc"]
    assert module.all_addresses == ["fc", "again"]
    assert module.num_calls == 2
    assert sorted(trace.params) == ["fc.bias", "fc.weight"]


def test_static_label_save_keeps_the_selected_payloads_and_still_validates():
    model, x = TinyMlp(), Tensor.ones(1, 3)
    trace = tl.trace(model, x, backend="tinygrad", save=tl.func("where"))
    kept = [op.func_name for op in trace.saved_ops]
    assert kept == ["where"]
    assert trace.validate_forward_pass() is True
    by_module = tl.trace(model, x, backend="tinygrad", save=tl.module("fc"))
    assert by_module.saved_ops and all(op.module.startswith("fc") for op in by_module.saved_ops)


def test_a_tlspec_round_trip_loads_tinygrad_tensors(tmp_path):
    name, model, _ = next(entry for entry in BATTERY if entry[0] == "outside_constant")
    trace = tl.trace(model, Tensor(input_of(name)), backend="tinygrad")
    path = str(tmp_path / "trace.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert loaded.backend == "tinygrad" and loaded.labels == trace.labels
    for op in trace.ops:
        if op.saved:
            assert isinstance(loaded[op.label].out, Tensor)
            np.testing.assert_array_equal(loaded[op.label].out.numpy(), op.out.numpy())
    assert loaded.payload_load_status == {op.label: "value" for op in trace.ops if op.saved}
    status = loaded.validation_replay_status
    assert status.state == "unavailable"
    assert status.reason == "loaded_trace_runtime_capture_stripped"
    with pytest.raises(TypeError):
        bool(status)
