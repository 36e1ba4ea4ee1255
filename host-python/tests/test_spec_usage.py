"""The spec's usage on PyTorch runs unchanged: routing by model type, the pinned backend name,
CaptureOptions (torch accepts the preview backends' fields as inert inputs), selectors, summary."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import torchlens as tl
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.torch


def small_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).eval()


def test_backend_none_routes_a_torch_model_to_torch():
    model, x = small_model(), torch.ones((1, 3), dtype=torch.float32)
    trace = tl.trace(model, x)
    print(trace.summary())
    assert trace.backend == "torch"
    pinned = tl.trace(model, x, backend="torch")
    assert pinned.labels == trace.labels


def test_capture_options_are_accepted_and_preview_fields_are_inert():
    model, x = small_model(), torch.ones((1, 3))
    baseline = tl.trace(model, x)
    options = CaptureOptions(
        jax_control_flow="region",
        jax_max_control_flow_unroll=8,
        module_identity_mode="object_module",
        payload_policy="array_payloads",
    )
    trace = tl.trace(model, x, capture=options)
    assert trace.labels == baseline.labels
    assert trace.summary() == baseline.summary()
    flat = tl.trace(model, x, capture=CaptureOptions(compute_input_output_distances=False))
    assert flat["relu_1_3"].min_distance_from_input is None
    assert baseline["relu_1_3"].min_distance_from_input == 2


def test_selectors_compose_as_in_the_spec():
    model, x = small_model(), torch.ones((1, 3))
    trace = tl.trace(model, x, save=tl.func("relu") | tl.module("2"))
    assert [op.label for op in trace.saved_ops] == ["relu_1_3", "linear_2_4"]
    assert torch.equal(trace["linear_2_4"].out, model(x))
    inside = trace.select(tl.in_module("0") | tl.label_contains("relu"))
    assert [op.label for op in inside] == ["linear_1_2", "relu_1_3"]


def test_record_and_fork_are_built_on_torch():
    # Their behaviour is tested in test_torch_record.py and test_torch_live_edits.py.
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    assert tl.record(model, torch.ones(1, 3), save=tl.func("relu")).labels == ["relu_1_3"]
    assert tl.trace(model, torch.ones(1, 3)).fork().do(tl.func("relu"), tl.zero_ablate()).ops[2].is_edited
