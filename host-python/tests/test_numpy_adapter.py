"""The NumPy test adapter on its own: it reaches the package only through the entry-point
group, it reads a module-level array the core turns into a constant op of its own, and a kit
session records edit records that survive a ``.tlspec``."""

from __future__ import annotations

import importlib.metadata

import numpy
import pytest
from numpy_adapter import Module
from numpy_adapter.example import Linear

import torchlens as tl
from torchlens.adapter_kit import CaptureRequest, CaptureSession, SaveRequest
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.numpy_adapter

#: Read by a model without being declared: the core inserts a constant op for it.
MODULE_LEVEL_OFFSET = numpy.arange(4.0)


class ReadsModuleLevelArray(Module):
    def __init__(self) -> None:
        rng = numpy.random.default_rng(1)
        self.fc1 = Linear(rng, 4, 4)
        self.fc2 = Linear(rng, 4, 4)

    def forward(self, x):
        return self.fc2(numpy.maximum(numpy.add(self.fc1(x), MODULE_LEVEL_OFFSET), 0.0))


def test_the_adapter_is_discovered_through_the_entry_point_group():
    from torchlens.backends.registry import built_in_specs

    assert "numpy" in tl.backends.names()
    assert "numpy" not in [spec.name for spec in built_in_specs()]
    assert tl.backends.resolve(ReadsModuleLevelArray(), numpy.ones((1, 4)), None).name == "numpy"
    # It is a plugin installed with pip (host-python/tests/numpy_adapter_plugin), declared by its
    # own distribution, as the built-in backends are declared by torchlens's.
    plugin = importlib.metadata.distribution("torchlens-numpy-adapter")
    assert [(entry.name, entry.value) for entry in plugin.entry_points] == [
        ("numpy", "numpy_adapter.declaration:SPEC")
    ]
    built_in = importlib.metadata.distribution("torchlens").entry_points.select(group="torchlens.backends")
    assert sorted(entry.name for entry in built_in) == sorted(spec.name for spec in built_in_specs())


def test_a_constant_the_core_inserts_does_not_shift_which_values_a_narrow_save_keeps():
    model, x = ReadsModuleLevelArray(), numpy.linspace(-1.0, 1.0, 8).reshape(2, 4)
    with pytest.warns(tl.errors.CaptureUnverifiedWarning):
        trace = tl.trace(model, x, save=tl.func("maximum") | tl.module("fc2"))
    assert trace.capture_reason == "unregistered_value_read"
    inserted = [op for op in trace.ops if op.is_constant]
    assert len(inserted) == 1 and not inserted[0].saved
    assert inserted[0].index < trace.select(tl.func("maximum"))[0].index
    hidden = numpy.maximum(model.fc1(x) + MODULE_LEVEL_OFFSET, 0.0)
    saved = {op.func_name: op.out for op in trace.saved_ops}
    assert set(saved) == {"maximum", "add"}
    assert numpy.array_equal(saved["maximum"], hidden)
    assert numpy.array_equal(saved["add"], model.fc2(hidden))


def test_edit_records_reach_the_trace_and_survive_a_file(tmp_path):
    spec = tl.backends.get_spec("numpy")
    adapter = tl.backends.get_backend("numpy")
    request = CaptureRequest(spec, None, (), {}, CaptureOptions(), SaveRequest("all"))
    rule = tl.when(tl.func("tanh"), tl.scale(0.5))
    x = numpy.ones((2,))
    with CaptureSession(request) as session:
        session.module(0, ["self"], "function", False, False)
        x_id, y_id = session.new_value_id(), session.new_value_id()
        session.input("x", x_id, x, x.shape, "float64")
        edited = adapter.apply_action(rule.action, numpy.tanh(x))
        session.op("tanh", [(x_id, 0)], [(y_id, edited, edited.shape, "float64")])
        session.edit(y_id, rule.describe(), rule.action.describe(), "post")
        session.output("output", y_id)
        trace = session.finish(adapter)
    op = trace.select(tl.func("tanh"))[0]
    assert op.is_edited and not trace.inputs[0].is_edited
    [record] = op.fire_records
    assert (record.target_label, record.helper_name, record.timing) == (op.label, "scale(0.5)", "post")
    assert record.rule == rule.describe()
    numpy.testing.assert_allclose(op.out, numpy.tanh(x) * 0.5)
    path = str(tmp_path / "edited.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert loaded[op.label].fire_records == op.fire_records


def test_a_stop_frontier_and_decisions_use_the_adapter_ids():
    spec = tl.backends.get_spec("numpy")
    adapter = tl.backends.get_backend("numpy")
    request = CaptureRequest(spec, None, (), {}, CaptureOptions(), SaveRequest("selected", tl.func("exp")))
    x = numpy.ones((2,))
    with CaptureSession(request) as session:
        session.module(0, ["self"], "function", False, False)
        # Ids far from the core's op numbers: nothing may confuse the two.
        x_id = 1000
        session.input("x", x_id, x, x.shape, "float64")
        session.op("tanh", [(x_id, 0)], [(2000, numpy.tanh(x), (2,), "float64")])
        session.op("exp", [(2000, 0)], [(3000, numpy.exp(numpy.tanh(x)), (2,), "float64")])
        session.mark_stopped("stop_after", [3000])
        trace = session.finish(adapter)
    assert [op.label for op in trace.saved_ops] == [trace.select(tl.func("exp"))[0].label]
    assert trace.is_stopped and trace.info["frontier"] == [trace.select(tl.func("exp"))[0].index]


def _one_op_trace(call, parent: numpy.ndarray):
    """A trace of one op reading ``parent``, whose replay record re-runs ``call``."""
    from torchlens.adapter_kit.replay import ReplayRecord, ReplayRuntime, ValueRef

    spec = tl.backends.get_spec("numpy")
    adapter = tl.backends.get_backend("numpy")
    request = CaptureRequest(spec, None, (), {}, CaptureOptions(), SaveRequest("all"))
    out = call(parent)
    with CaptureSession(request) as session:
        session.module(0, ["self"], "function", False, False)
        session.input("x", 1, parent, parent.shape, parent.dtype.name)
        session.op("f", [(1, 0)], [(2, out, out.shape, out.dtype.name)])
        session.output("output", 2)
        records = {2: ReplayRecord(call, "f", (ValueRef(1),))}
        return session.finish(adapter, runtime=ReplayRuntime(records, lambda: [call(parent)]))


def test_an_edge_no_perturbation_can_show_is_unverified_not_failed():
    # The op claims to read x but does not: every perturbation of x leaves it unchanged. It
    # replays exactly, so nothing is shown wrong either (a zero weight hides its input the
    # same way): unverified, naming the op.
    trace = _one_op_trace(lambda x: numpy.tanh(numpy.ones(3)), numpy.arange(3.0))
    status = trace.validation_replay_status
    assert (status.state, status.reason) == ("unverified", "perturbation_inconclusive")
    assert status.unverified_ops == [(trace.ops[1].label, "perturbation_inconclusive")]
    assert status.replayed == 1 and status.perturbation_proven == 0


def test_an_op_whose_arguments_cannot_be_perturbed_is_unverified_not_passed():
    # An empty argument has no element to perturb: the op is replayed but its edge unproven.
    trace = _one_op_trace(lambda x: numpy.full(2, x.size, dtype=float), numpy.zeros((0,)))
    status = trace.validation_replay_status
    assert (status.state, status.reason) == ("unverified", "no_perturbable_parent")
    with pytest.raises(TypeError):
        bool(status)


def test_value_dependent_functions_are_perturbed_not_exempt():
    # Comparisons, rounding and arg-reductions get perturbations that can change them.
    for call, parent in (
        (lambda x: numpy.greater(x, 0.0), numpy.array([0.5, 2.0])),
        (lambda x: numpy.floor(x), numpy.array([0.25, 3.5])),
        (lambda x: numpy.asarray(numpy.argmax(x)), numpy.array([1.0, 5.0, 2.0])),
        (lambda x: numpy.isfinite(x), numpy.array([1.0, 2.0])),
    ):
        assert _one_op_trace(call, parent).validation_replay_status.state == "passed"


class _Passthrough(Module):
    def forward(self, x):
        return x


class _ReluThenPassthrough(Module):
    def __init__(self) -> None:
        self.passthrough = _Passthrough()

    def forward(self, x):
        return numpy.tanh(self.passthrough(numpy.maximum(x, 0.0)))


def test_a_value_a_module_passes_through_is_kept_by_its_module_selector():
    """The kit's recorder hands the session the objects a module call returns, so a value the
    module returns without computing it (decided at its own op, before the call) is held again
    at the call's exit: ``tl.module`` saves it and nothing is reported missed."""
    import warnings

    from torchlens.errors import SelectionIncompleteWarning

    model, x = _ReluThenPassthrough(), numpy.linspace(-1.0, 1.0, 6).reshape(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionIncompleteWarning)
        trace = tl.trace(model, x, save=tl.module("passthrough"))
    assert not getattr(trace, "selection_missed", None)
    assert [op.func_name for op in trace.saved_ops] == ["maximum"]
    assert numpy.array_equal(trace.saved_ops[0].out, numpy.maximum(x, 0.0))
