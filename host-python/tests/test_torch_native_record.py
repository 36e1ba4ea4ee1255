"""The native host records the ops of a full torch capture in one call each
(``backends/torch/native/src/held_op.rs``) and reports its module calls from native hooks
(``backends/torch/native/src/module_hooks.rs``); the Python path (``Capture.record``, ``Capture.pre_hook``,
``Capture.post_hook``) is the definition. Both must give the same trace: the same ops, edges,
sources, module calls, values, replay records and validation."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

import torchlens as tl
from conformance.models.torch import battery
from torchlens._core import versions
from torchlens.adapter_kit.replay import NO_KEYWORDS, ValueRef
from torchlens.backends.torch import capture as capture_module
from torchlens.backends.torch.capture import Capture

pytestmark = pytest.mark.torch

NATIVE_HOST = versions()["host"] == "native"


class _Mixed(nn.Module):
    """Ops the one-call path hands back to Python (a list of tensors, a tensor keyword argument,
    a constant read mid-forward), several outputs, ``__setitem__`` and in-place writes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.register_buffer("offset", torch.arange(6.0))

    def forward(self, x):
        a, b = self.fc(x).chunk(2, dim=-1)
        y = torch.cat([a, b], dim=-1) + self.offset
        y = torch.add(y, other=x, alpha=0.5)
        y[:, 0] = 1.0
        y.mul_(2)
        return torch.where(y > 0, y, torch.zeros_like(y)).sum(dim=-1)


def _trace(model, x, monkeypatch, native: bool, save: bool = True):
    """A trace of ``model`` with the one-call path on or off, and the ops that path recorded."""
    recorders = []
    real = Capture._held_recorder

    def keep(capture):
        recorder = real(capture) if native else None
        recorders.append(recorder)
        return recorder

    with monkeypatch.context() as patch:
        patch.setattr(Capture, "_held_recorder", keep)
        with torch.no_grad():
            trace = tl.trace(model, x, save=save)
    return trace, sum(recorder.recorded for recorder in recorders if recorder is not None)


def _facts(trace):
    return [
        (
            op.label,
            op.kind,
            op.func_name,
            [parent.label for parent in op.parents],
            op.parent_positions,
            op.shape,
            op.dtype,
            op.in_place,
            op.module,
            op.source,
        )
        for op in trace.ops
    ]


def _module_facts(trace):
    return [
        (address, module.class_name, module.num_calls, [str(call) for call in module.calls])
        for address, module in trace.modules.items()
    ]


def _template(item):
    """A replay template's item as comparable data: a reference by its kind and value id."""
    if isinstance(item, ValueRef):
        return (type(item).__name__, item.value)
    if isinstance(item, (tuple, list)):
        return type(item)([_template(part) for part in item])
    if isinstance(item, dict):
        return {key: _template(part) for key, part in item.items()}
    return item


def _replay_facts(trace):
    records = trace._runtime.records
    return {
        value_id: (
            record.call,
            record.func_name,
            record.output_index,
            _template(record.args),
            _template(record.kwargs),
        )
        for value_id, record in sorted(records.items())
    }


CASES = [*battery(), ("mixed", _Mixed().eval(), torch.randn(3, 6))]


#: ``save=`` arguments the one-call path serves: every value, none, and selectors whose live plan
#: decides at each op, by function or by the module calls open (the last also names a module's
#: outputs, which waits for the call's exit: those ops take the Python path).
SAVES = {
    "every value saved": True,
    "nothing saved": False,
    "by function": tl.func("relu") | tl.func("linear") | tl.func("add"),
    "inside a module or its outputs": tl.in_module("fc") | tl.module("fc") | tl.func("sum"),
}


@pytest.mark.parametrize("save", list(SAVES.values()), ids=list(SAVES))
@pytest.mark.parametrize("name,model,x", CASES, ids=[case[0] for case in CASES])
def test_the_one_call_path_records_what_the_python_path_records(name, model, x, save, monkeypatch):
    """With every output held, none (outputs are tagged, not pinned, and carry no payload), and
    a narrow ``save=`` (tagged outputs, the selected ones held)."""
    fast, recorded = _trace(model, x, monkeypatch, native=True, save=save)
    slow, fallback_only = _trace(model, x, monkeypatch, native=False, save=save)
    assert fallback_only == 0
    if NATIVE_HOST:
        assert recorded > 0, "the native host recorded no op in one call"
    assert _facts(fast) == _facts(slow)
    assert _module_facts(fast) == _module_facts(slow)
    pending = fast._runtime.records.pending
    if NATIVE_HOST:
        # The one-call path keeps its ops' replay facts until replay reads them.
        assert pending is not None and len(pending) > 0
    assert _replay_facts(fast) == _replay_facts(slow)
    assert pending is None or len(pending) == 0
    assert [op.saved for op in fast.ops] == [op.saved for op in slow.ops]
    for fast_op, slow_op in zip(fast.ops, slow.ops):
        if slow_op.saved:
            assert fast_op.saved and torch.equal(fast_op.value, slow_op.value), fast_op.label
    # The whole status, not the outcome alone: an unverified one is an object per trace.
    assert vars(fast.validation_replay_status) == vars(slow.validation_replay_status)


@pytest.mark.parametrize("save", [True, False], ids=["every value saved", "nothing saved"])
def test_calls_without_keywords_share_one_empty_keyword_template(save):
    """A long trace keeps no empty dict per op: the records of calls that passed no keyword
    argument share ``NO_KEYWORDS`` (the one-call path's records, made on first read, and the
    Python path's on the wasmtime-py host), and a call with keywords keeps its own."""
    with torch.no_grad():
        trace = tl.trace(_Mixed().eval(), torch.randn(3, 6), save=save)
    records = trace._runtime.records.values()
    linear = [record for record in records if record.func_name == "linear"]
    assert linear and all(record.kwargs is NO_KEYWORDS for record in linear)
    (add,) = [record for record in records if record.func_name == "add" and record.kwargs]
    assert type(add.kwargs) is dict and set(add.kwargs) == {"other", "alpha"}
    assert isinstance(add.kwargs["other"], ValueRef) and add.kwargs["alpha"] == 0.5
    if save:
        assert trace.validate_forward_pass()


def test_a_value_changed_in_place_after_the_one_call_path_held_it_is_refused():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with torch.no_grad():
        trace = tl.trace(model, torch.randn(2, 4))
        linear = next(op for op in trace.ops if op.func_name == "linear")
        assert linear.value is not None
        trace.output.add_(1.0)  # the output is an alias of the relu's held value
    relu = next(op for op in trace.ops if op.func_name == "relu")
    with pytest.raises(tl.errors.TorchLensError):
        relu.value  # noqa: B018 - reading it is the check


@pytest.mark.parametrize("save", ["all", "selected", "none"])
def test_a_finished_capture_is_freed_without_the_cyclic_collector(save):
    """The native recorder and hooks hold the capture's own methods: the capture must still be
    freed by reference counting when the trace returns (its values with it)."""
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()).eval()
    options = {"all": {}, "selected": {"save": tl.func("relu")}, "none": {"save": False}}[save]
    gc.collect()
    gc.disable()
    try:
        with torch.no_grad():
            for _ in range(3):
                tl.trace(model, torch.randn(2, 4), **options)
        alive = [item for item in gc.get_objects() if isinstance(item, Capture)]
    finally:
        gc.enable()
    assert alive == []


def test_where_torch_has_no_mode_push_the_python_mode_records_the_same_trace(monkeypatch):
    model, x = CASES[-1][1], CASES[-1][2]
    native, _ = _trace(model, x, monkeypatch, native=True)
    monkeypatch.setattr(capture_module, "_PUSH_MODE", None)
    fallback, recorded = _trace(model, x, monkeypatch, native=True)
    assert recorded == 0  # the recorder exists but is not the mode: the Python mode ran
    assert _facts(fallback) == _facts(native)
    assert _module_facts(fallback) == _module_facts(native)
