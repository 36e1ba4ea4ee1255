"""The backend contract: closed refusal codes (each triggered by a test before any side effect,
or owned by a backend not built yet), the fail-closed capability gate, routing, replay
validation, and the generated capability matrix."""

from __future__ import annotations

import importlib.util
import os

import numpy
import pytest
import torch
from cleanup_checks import nothing_installed
from test_jax_refusals import JAX_TRIGGERS

import torchlens as tl
from conformance.models.torch import Counting, battery
from torchlens.backends import BackendProtocol, BackendSpec, FrameworkRequirement, gate, get_spec
from torchlens.errors import BackendCapabilityConformanceError, BackendUnsupportedError
from torchlens.options import CaptureOptions

BUILT_OWNERS = {"registry", "torch", "jax"}
UNBUILT_OWNERS = {"tf", "mlx", "paddle", "tinygrad", "preview"}


def _ambiguous():
    twin = BackendSpec(
        name="torch_twin",
        aliases=(),
        maturity="stable",
        requirement=FrameworkRequirement("torch", "2.0", "3.0", "2.15.0", "torch"),
        detect=lambda model, inputs: isinstance(model, torch.nn.Module),
        adapter="torchlens.backends.torch.adapter:TorchAdapter",
    )
    tl.backends.register_backend(twin)
    try:
        model, x = Counting(), torch.randn(1, 3)
        tl.trace(model, x)
    finally:
        tl.backends.unregister_backend("torch_twin")


def _foreign():
    model, x = Counting(), torch.randn(1, 3)
    tl.trace(model, x, backend="tf")


TRIGGERS = {
    # intervene_unsupported, stop_after_unsupported, value_dependent_save_unsupported and
    # followed_by_unsupported belong to the preview backends that raise them (torch has all four).
    # Torch has backward capture and derived gradients now: a preview backend raises these.
    "capability_unsupported": lambda model, x: tl.record(
        lambda a: a * 2, _jax_array(), save=tl.func("mul"), backend="jax"
    ),
    "backend_unknown": lambda model, x: tl.trace(model, x, backend="caffe"),
    "backend_undetected": lambda model, x: tl.trace(object(), x),
    "backend_ambiguous": lambda model, x: _ambiguous(),
    "foreign_tensor_input": lambda model, x: tl.trace(model, [x, _jax_array()], backend="torch"),
    "framework_not_installed": lambda model, x: tl.trace(model, x, backend="absent-framework"),
    "backend_not_built": lambda model, x: tl.trace(model, x, backend="not-built-installed"),
    "option_value_invalid": lambda model, x: tl.trace(model, x, capture=CaptureOptions(jax_control_flow="?")),
    "backward_ready_unsupported": lambda model, x: tl.trace(
        lambda a: a * 2, _jax_array(), backend="jax", capture=CaptureOptions(backward_ready=True)
    ),
    "save_grads_unsupported": lambda model, x: tl.trace(
        lambda a: a * 2, _jax_array(), backend="jax", save_grads=True
    ),
    # Torch takes every CaptureOptions value as inert; JAX implements fewer module modes.
    "option_unsupported": lambda model, x: tl.trace(
        lambda a: a * 2,
        _jax_array(),
        backend="jax",
        capture=CaptureOptions(module_identity_mode="object_module"),
    ),
}


def _jax_array():
    import jax.numpy as jnp

    return jnp.ones((1, 3))


@pytest.fixture
def _registered_not_built_backend():
    # A real, installed framework (numpy) behind a backend that is registered but not built.
    spec = BackendSpec(
        name="not-built-installed",
        aliases=(),
        maturity="planned",
        requirement=FrameworkRequirement("numpy", "1.0", "3.0", "2.4.6", "numpy"),
    )
    tl.backends.register_backend(spec)
    # A backend whose framework no environment has (whichever real frameworks are installed).
    absent = BackendSpec(
        name="absent-framework",
        aliases=(),
        maturity="planned",
        requirement=FrameworkRequirement("torchlens_absent_framework", "1.0", "2.0", "1.0", "absent"),
    )
    tl.backends.register_backend(absent)
    yield
    tl.backends.unregister_backend("not-built-installed")
    tl.backends.unregister_backend("absent-framework")


@pytest.mark.usefixtures("_registered_not_built_backend")
@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_each_refusal_fires_before_side_effects(code):
    model, x = Counting(), torch.randn(1, 3)
    with pytest.raises(BackendUnsupportedError) as caught:
        TRIGGERS[code](model, x)
    assert caught.value.code == code
    assert caught.value.remedy
    assert code in tl.backends.REFUSAL_CODES
    assert model.calls == 0
    nothing_installed(model, x)


def _tinygrad_triggers():
    """The codes test_tinygrad_refusals.py triggers (none where tinygrad is not installed: its
    codes then count as owned by a backend that cannot run here)."""
    if importlib.util.find_spec("tinygrad") is None:
        return {}
    from test_tinygrad_refusals import TINYGRAD_TRIGGERS

    return TINYGRAD_TRIGGERS


def _paddle_triggers():
    """The codes test_paddle_refusals.py triggers (none where Paddle is not installed)."""
    if importlib.util.find_spec("paddle") is None:
        return {}
    from test_paddle_refusals import PADDLE_TRIGGERS, TRIGGERED_ELSEWHERE

    for file, test in TRIGGERED_ELSEWHERE.values():
        # A listed test must exist (the listing is checked, not trusted).
        assert callable(getattr(importlib.import_module(file.removesuffix(".py")), test)), test
    return {**PADDLE_TRIGGERS, **TRIGGERED_ELSEWHERE}


#: The TensorFlow backend's own codes → (test file, test) that triggers each (TensorFlow is
#: imported by those tests when they run, never here).
TF_TRIGGERED = {
    "tf_graph_only_grad": ("test_tf_grads.py", "test_a_graph_only_entry_refuses_grad_options_before_it_runs"),
    "tf_intervene_unreachable": ("test_tf_edits.py", "test_an_op_outside_the_wrap_layer_is_unreachable"),
    "tf_graph_only_intervene": (
        "test_tf_refusals.py",
        "test_graph_only_entries_refuse_edits_and_object_module_before_they_run",
    ),
    "tf_keras_backend_mismatch": (
        "test_tf_refusals.py",
        "test_a_keras_model_on_another_keras_backend_refuses_before_it_runs",
    ),
    "tf_keras_unbuildable": (
        "test_tf_refusals.py",
        "test_an_unbuilt_keras_model_it_cannot_build_refuses_before_it_builds",
    ),
    "tf_payload_unencodable": ("test_tf_capture.py", "test_a_string_payload_refuses_to_save"),
    "tf_variable_write": (
        "test_tf_refusals.py",
        "test_a_batch_norm_training_call_refuses_before_the_model_runs",
    ),
}


def _tf_triggers():
    """The codes the TensorFlow tests trigger (none where TensorFlow is not installed)."""
    if importlib.util.find_spec("tensorflow") is None:
        return {}
    for file, test in TF_TRIGGERED.values():
        # A listed test must exist (the listing is checked, not trusted).
        assert callable(getattr(importlib.import_module(file.removesuffix(".py")), test)), test
    return TF_TRIGGERED


def test_every_refusal_code_has_a_test_or_an_unbuilt_owner():
    from torchlens.backends import refusal_codes

    tinygrad_triggers = _tinygrad_triggers()
    paddle_triggers = _paddle_triggers()
    tf_triggers = _tf_triggers()
    built = (
        BUILT_OWNERS
        | ({"tinygrad"} if tinygrad_triggers else set())
        | ({"paddle"} if paddle_triggers else set())
        | ({"tf"} if tf_triggers else set())
    )
    for code, (owner, _meaning) in refusal_codes().items():
        if owner in built:
            # JAX's own codes are triggered in test_jax_refusals.py, tinygrad's in
            # test_tinygrad_refusals.py, Paddle's in test_paddle_refusals.py.
            assert (
                code in TRIGGERS
                or code in JAX_TRIGGERS
                or code in tinygrad_triggers
                or code in paddle_triggers
                or code in tf_triggers
            ), f"{code} (owner {owner}) has no test that triggers it"
        else:
            assert owner in UNBUILT_OWNERS, f"{code} has an unknown owner {owner!r}"


def test_validation_reasons_are_a_closed_set():
    reasons = tl.backends.VALIDATION_REASONS
    for reason in (
        "constant_producer_leaf",
        "constant_parent_payload",
        "loaded_trace_runtime_capture_stripped",
    ):
        assert reason in reasons


def test_a_true_flag_without_implementation_fails_registration_and_the_gate():
    spec = BackendSpec(
        name="overclaiming",
        aliases=(),
        maturity="preview",
        requirement=FrameworkRequirement("torch", "2.0", "3.0", "2.15.0", "torch"),
        capabilities={"intervene": True},
        capability_implementations={},
    )
    with pytest.raises(BackendCapabilityConformanceError):
        tl.backends.register_backend(spec)
    assert "overclaiming" not in tl.backends.names()
    # Registration bypassed: the gate still refuses.
    with pytest.raises(BackendCapabilityConformanceError):
        gate(spec, "intervene")
    # Fail-closed the other way: a False flag refuses with the capability's code.
    with pytest.raises(BackendUnsupportedError) as caught:
        gate(get_spec("jax"), "streaming")
    assert caught.value.code == "streaming_unsupported"


@pytest.mark.usefixtures("_registered_not_built_backend")
def test_a_missing_framework_names_its_install_extra():
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(Counting(), torch.randn(1, 3), backend="absent-framework")
    assert caught.value.code == "framework_not_installed"
    assert "torchlens[absent]" in caught.value.remedy


def test_routing():
    model, x = Counting(), torch.randn(1, 3)
    assert tl.backends.resolve(model, x, None).name == "torch"
    assert tl.backends.resolve(lambda t: t * 2, x, None).name == "torch"
    assert tl.backends.resolve(model, x, "pytorch").name == "torch"
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.backends.resolve(model, (x, _jax_array()), None)
    assert caught.value.code == "foreign_tensor_input"
    # A function of jax arrays routes to the jax backend.
    assert tl.backends.resolve(lambda value: value * 2, _jax_array(), None).name == "jax"


def test_the_torch_protocol_has_every_part():
    protocol = get_spec("torch").protocol()
    assert isinstance(protocol, BackendProtocol)
    model, x = Counting(), torch.randn(1, 3)
    reference = protocol.reference_output(model, (x,), {})
    assert torch.equal(reference, model(x))
    copy = protocol.host_copy(reference)
    assert (copy == reference.numpy()).all() and not numpy.shares_memory(copy, reference.numpy())
    assert protocol.realize([reference])[0] is reference
    assert set(protocol.refusal_codes) <= tl.backends.REFUSAL_CODES
    assert protocol.requirement.extra == "torch"


@pytest.mark.torch
@pytest.mark.parametrize("name,model,x", battery(), ids=[entry[0] for entry in battery()])
def test_a_clean_trace_of_each_battery_model_validates(name, model, x):
    trace = tl.trace(model, x)
    status = trace.validation_replay_status
    assert status.state == "passed", (status, [d for d in status.decisions if d[1] != "passed"][:5])
    assert trace.validate_forward_pass() is True
    assert tl.validate(trace) is True


@pytest.mark.torch
def test_tampering_with_one_saved_value_fails_and_names_that_op():
    name, model, x = battery()[1]
    trace = tl.trace(model, x)
    target = trace.select(tl.func("relu"))[0]
    target.out.view(-1)[0] += 1.0
    status = trace.validation_replay_status
    assert status.state == "failed"
    assert status.first_failed_op == target.label
    assert trace.validate_forward_pass() is False


@pytest.mark.torch
def test_a_loaded_trace_reports_validation_unavailable(tmp_path):
    name, model, x = battery()[0]
    trace = tl.trace(model, x)
    trace.save(str(tmp_path / "t.tlspec"))
    status = tl.load(str(tmp_path / "t.tlspec")).validation_replay_status
    assert status.state == "unavailable"
    assert status.reason == "loaded_trace_runtime_capture_stripped"
    with pytest.raises(TypeError):
        bool(status)


def test_the_capability_matrix_in_docs_matches_the_registry():
    from torchlens.backends.matrix import generated_block, render

    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "backends.md")
    with open(path, encoding="utf-8") as handle:
        assert generated_block(handle.read()) == render(), (
            "regenerate with: python scripts/checks/backend_docs_lockstep.py --fix"
        )
