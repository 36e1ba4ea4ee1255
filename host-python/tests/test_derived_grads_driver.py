"""The kit's derived-gradient driver (``torchlens.adapter_kit.derived_grads``) as every backend
uses it: the same refusal of a loss that is not a scalar, and the same shape of exposed per-op
records (``exact``, with the backend's independent checks), on each backend's standard MLP."""

from __future__ import annotations

import dataclasses

import conformance_paths  # noqa: F401
import numpy as np
import pytest
from backend_cases import backend_params, require_installed

import torchlens as tl
from conformance.models import models_of
from torchlens import CaptureOptions
from torchlens.errors import BackendUnsupportedError


def _mlp(name):
    require_installed(name)
    models = models_of(name)
    model, args = next(standard for standard in models.models if standard.name == "mlp").build()
    return models, model, args


@pytest.mark.parametrize("name", backend_params(built_in_only=True))
def test_a_loss_that_is_not_a_scalar_is_refused_on_every_backend(name):
    models, model, args = _mlp(name)
    options = dataclasses.replace(models.grad_options(model, args), loss_fn=lambda output: output)
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, args, backend=name, capture=CaptureOptions(grad_options=options))
    assert caught.value.code == "option_value_invalid"
    assert "scalar" in caught.value.message and caught.value.remedy


@pytest.mark.parametrize("name", backend_params(built_in_only=True))
def test_per_op_records_are_exact_and_name_their_checks_on_every_backend(name):
    models, model, args = _mlp(name)
    options = dataclasses.replace(models.grad_options(model, args), intermediate_grads=True)
    trace = tl.trace(model, args, backend=name, capture=CaptureOptions(grad_options=options))
    autograd = trace.autograd
    assert not autograd.has_backward_pass
    assert models.grad_key in autograd.derived_grads
    assert any(key.startswith("params.") for key in autograd.derived_grads)
    assert autograd.intermediate_unavailable is None
    records = autograd.intermediate_derived_grads
    assert records
    for label, record in records.items():
        assert record.status == "exact" and len(record.checks) == 2
        assert np.asarray(record).shape == tuple(trace[label].shape)
