"""Replay validation on real models: no false alarm on five representative torchvision
classifiers (random weights, eval, small inputs), and every tamper still fails, on torch and
JAX, including inside a ConvNeXt block and a ViT head. The whole torchvision sweep is
``make sweep`` (benchmarks/validation_sweep.py)."""

from __future__ import annotations

import pytest
import torch

import torchlens as tl
from torchlens.adapter_kit.replay import ValueRef

#: (torchvision name, input side): ConvNeXt, ViT and Swin V2 are the ones a fixed nudge got
#: wrong; ResNet and MobileNet stand for the plain convolutional families.
REPRESENTATIVE = [
    ("convnext_tiny", 32),
    ("vit_b_32", 224),
    ("swin_v2_t", 64),
    ("resnet18", 32),
    ("mobilenet_v3_small", 32),
]


def _model(name: str, side: int):
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.get_model(name).eval(), torch.randn(1, 3, side, side)


@pytest.fixture(scope="module")
def representative_traces():
    traces = {}
    for name, side in REPRESENTATIVE:
        model, x = _model(name, side)
        with torch.no_grad():
            expected = model(x)
        traces[name] = (model, x, expected, tl.trace(model, x))
    return traces


@pytest.mark.torch
@pytest.mark.parametrize("name", [name for name, _ in REPRESENTATIVE])
def test_representative_models_capture_right_and_validate(name, representative_traces):
    _model_object, _x, expected, trace = representative_traces[name]
    assert torch.allclose(trace.outputs[0].out, expected, atol=1e-5)
    status = trace.validation_replay_status
    assert status.state == "passed", (status, status.unverified_ops[:5])
    assert trace.validate_forward_pass([expected]) is True
    assert status.replayed == status.perturbation_proven + status.value_independent
    assert status.unverified == 0


@pytest.mark.torch
def test_swin_zero_fill_is_value_independent_not_inert(representative_traces):
    trace = representative_traces["swin_v2_t"][3]
    zero_fills = {op.label for op in trace.ops if op.func_name == "zero_"}
    assert zero_fills
    reasons = {label: reason for label, _, reason in trace.validation_replay_status.decisions}
    assert {reasons[label] for label in zero_fills} == {"value_independent_replay"}


@pytest.mark.torch
def test_a_zero_initialised_head_is_unverified_not_failed():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    torch.nn.init.zeros_(model[2].weight)
    torch.nn.init.zeros_(model[2].bias)
    trace = tl.trace(model, torch.randn(2, 4))
    # The head's weight is still perturbable, so its edge is proven; its input alone is not,
    # and nothing is called wrong.
    assert trace.validation_replay_status.state in ("passed", "unverified")
    assert trace.validation_replay_status.failed == 0


# ---- tampering: every case fails, naming the op -------------------------------------------------


def _torch_case(name):
    if name == "convnext_block":
        model, x = _model("convnext_tiny", 32)
        return "torch", model, x, "features.1.0"
    if name == "vit_head":
        model, x = _model("vit_b_32", 224)
        # The classifier and the final norm before it (the head alone has no same-shaped twin).
        return "torch", model, x, ("encoder.ln", "heads")
    model = torch.nn.Sequential(
        torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)
    )
    return "torch", model, torch.randn(2, 5), None


def _jax_case():
    from conformance.models.jax import mlp, mlp_args

    params, x = mlp_args()
    return "jax", mlp, (params, x), None


def _case(name):
    return _jax_case() if name == "jax_mlp" else _torch_case(name)


def _values(trace):
    """Where replay reads values: runtime copies (JAX) or the saved payloads (torch)."""
    runtime = trace._runtime
    return runtime.values if runtime.values is not None else trace._payloads


def _inside(trace, module):
    """Computed, saved ops inside ``module`` (every computed op when None)."""
    return [
        op
        for op in trace.ops
        if op.kind == "compute"
        and op.saved
        and (module is None or any(call.split(":")[0].startswith(module) for call in op.module_stack))
    ]


def _twin(trace, op, reader):
    """Another computed op with ``op``'s shape and dtype but other values (not ``reader``)."""
    for other in trace.ops:
        if other.kind == "compute" and other.saved and other.index not in (op.index, reader.index):
            if other.shape == op.shape and other.dtype == op.dtype and not _equal(other.out, op.out):
                return other
    raise AssertionError(f"no op shaped like {op.label}")


def _read_parent(trace, module):
    """An op inside ``module`` and a computed parent of it that has a twin elsewhere."""
    for reader in _inside(trace, module):
        for parent in reader.parents:
            if parent.kind == "compute" and parent.saved:
                try:
                    return reader, parent, _twin(trace, parent, reader)
                except AssertionError:
                    continue
    raise AssertionError("no op to rewire")


def _equal(left, right):
    import numpy

    return numpy.array_equal(numpy.asarray(left), numpy.asarray(right))


def _traced(case):
    """A fresh trace of a tamper case, and the module whose ops the tamper targets."""
    backend, model, x, module = _case(case)
    return tl.trace(model, x, backend=backend), module


CASES = [
    pytest.param("torch_mlp", marks=pytest.mark.torch),
    pytest.param("convnext_block", marks=pytest.mark.torch),
    pytest.param("vit_head", marks=pytest.mark.torch),
    pytest.param("jax_mlp", marks=pytest.mark.jax),
]


@pytest.mark.parametrize("case", CASES)
def test_a_changed_saved_value_fails(case):
    trace, module = _traced(case)
    target = _inside(trace, module)[-1]
    value_id = target._info["value"]
    values = _values(trace)
    values[value_id] = values[value_id] * 1.5 + 1.0  # a new object: the version guard cannot see it
    status = trace.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == target.label


@pytest.mark.parametrize("case", CASES)
def test_a_parent_edge_rewired_to_another_op_fails(case):
    trace, module = _traced(case)
    # An op that reads `second` now claims to read `first` instead (same shape and dtype).
    reader, second, first = _read_parent(trace, module)
    record = trace._runtime.records[reader._info["value"]]
    wanted = second._info["value"]

    def rewire(template):
        if isinstance(template, ValueRef) and template.value == wanted:
            return type(template)(first._info["value"])
        if isinstance(template, (list, tuple)):
            return type(template)(rewire(item) for item in template)
        if isinstance(template, dict):
            return {key: rewire(item) for key, item in template.items()}
        return template

    record.args, record.kwargs = rewire(record.args), rewire(record.kwargs)
    status = trace.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == reader.label


@pytest.mark.parametrize("case", CASES)
def test_a_stale_label_mapping_fails(case):
    # Two ops' values swapped: each label now names the other op's value.
    trace, module = _traced(case)
    _reader, first, second = _read_parent(trace, module)
    values = _values(trace)
    a, b = first._info["value"], second._info["value"]
    values[a], values[b] = values[b], values[a]
    status = trace.validation_replay_status
    assert status.state == "failed" and status.first_failed_op in (first.label, second.label)


@pytest.mark.parametrize("case", CASES)
def test_a_forged_edit_declaration_fails(case):
    trace, module = _traced(case)
    target = _inside(trace, module)[-1]
    trace._runtime.edits[target._info["value"]] = ((tl.zero_ablate(),), target.out)
    status = trace.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == target.label
    assert "edit_declaration_mismatch" in {reason for _, _, reason in status.decisions}
