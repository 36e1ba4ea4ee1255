"""The shared contract, run over every registered backend from one parametrised suite: a backend
gets these tests by being registered (built-in declarations and the ``torchlens.backends``
entry-point group alike; the NumPy test adapter comes in through the entry point). A built
backend runs on its declared example model; a planned one must refuse before anything runs."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import threading

import numpy
import pytest
from backend_cases import backend_params, require_installed

import torchlens as tl
from torchlens.adapter_kit.derived_grads import GradOptions as KitGradOptions
from torchlens.adapter_kit.framework_version import installed_version
from torchlens.adapter_kit.session import open_session_count
from torchlens.backends.spec import resolve_reference
from torchlens.errors import ArgumentError, BackendUnsupportedError
from torchlens.options import CaptureOptions


def _built(name):
    spec = tl.backends.get_spec(name)
    require_installed(name)
    assert spec.example is not None, f"the {name} backend declares no example model for the contract tests"
    model, args = resolve_reference(spec.example)()
    return spec, tl.backends.get_backend(name), model, args


def _host(adapter, value):
    return numpy.asarray(adapter.to_numpy(value))


def _framework_namespace(spec):
    """Every attribute of the framework's top-level module, by identity: a capture must leave
    each exactly as it found it."""
    module = importlib.import_module(spec.requirement.module)
    return {name: id(value) for name, value in vars(module).items()}


@pytest.mark.parametrize("name", backend_params())
def test_the_example_traces_validates_and_names_its_backend(name):
    spec, adapter, model, args = _built(name)
    trace = tl.trace(model, args, backend=name)
    assert trace.backend == name and trace.spec is spec
    assert trace.capture_verified
    assert trace.outputs and all(op.saved for op in trace.ops if op.kind not in ("output",))
    assert trace.validate_forward_pass() is True
    reference = adapter.output_leaves(adapter.reference_output(model, args, {}))
    for op, value in zip(trace.outputs, reference):
        numpy.testing.assert_allclose(_host(adapter, op.out), _host(adapter, value), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", backend_params())
def test_validation_compares_exactly_the_outputs_the_model_returned(name):
    spec, adapter, model, args = _built(name)
    trace = tl.trace(model, args, backend=name)
    returned = adapter.reference_output(model, args, {})
    # What the model returned, as it returned it (a lone array included), validates; so does a
    # flat list of its arrays, and an empty list means "run the model again" (the spec's form).
    assert trace.validate_forward_pass(returned) is True
    leaves = adapter.output_leaves(returned)
    assert trace.validate_forward_pass(list(leaves)) is True
    assert trace.validate_forward_pass([]) is True
    too_few = [list(leaves)[:-1]] if len(leaves) > 1 else []
    for wrong in [list(leaves) + list(leaves), list(leaves) + ["junk", 5], *too_few]:
        with pytest.raises(ArgumentError) as caught:
            trace.validate_forward_pass(wrong)
        assert caught.value.code == "validation_outputs_mismatch", wrong


@pytest.mark.parametrize("name", backend_params())
def test_a_saved_file_loads_back_with_the_same_values(name, tmp_path):
    spec, adapter, model, args = _built(name)
    trace = tl.trace(model, args, backend=name)
    path = str(tmp_path / "trace.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert loaded.backend == name
    assert loaded.labels == trace.labels
    for op in trace.ops:
        if op.saved:
            assert numpy.array_equal(_host(adapter, loaded[op.label].out), _host(adapter, op.out))
    assert loaded.validation_replay_status.state == "unavailable"


@pytest.mark.parametrize("name", backend_params())
def test_a_saved_file_records_the_installed_framework_version(name, tmp_path):
    # The kit reads every backend's version the same way (MLX and tinygrad carry no
    # __version__, and their files used to say "unknown").
    spec, adapter, model, args = _built(name)
    path = str(tmp_path / "trace.tlspec")
    tl.trace(model, args, backend=name).save(path)
    manifest = tl.load(path).manifest
    assert manifest["backend_runtime"] == spec.requirement.module
    installed = installed_version(spec.requirement.module)
    if installed is not None:
        # torch's __version__ carries its build's local label (2.15.0+cu132), its metadata not.
        assert manifest["backend_version"].split("+")[0] == installed.split("+")[0]
    assert manifest["backend_version"] != "unknown"


@pytest.mark.parametrize("name", backend_params())
def test_a_narrow_save_keeps_exactly_the_matched_ops_and_the_leaves(name):
    spec, adapter, model, args = _built(name)
    full = tl.trace(model, args, backend=name)
    target = [op for op in full.ops if op.kind == "compute"][-2]
    narrow = tl.trace(model, args, backend=name, save=tl.label(target.label))
    kept = {op.label for op in narrow.saved_ops}
    leaves = {op.label for op in narrow.ops if op.kind in ("constant", "buffer")}
    assert kept == {target.label} | leaves
    assert numpy.array_equal(_host(adapter, narrow[target.label].out), _host(adapter, target.out))
    nothing = tl.trace(model, args, backend=name, save=False)
    assert nothing.saved_ops == [] and nothing.labels == full.labels


@pytest.mark.parametrize("name", backend_params())
def test_selector_text_means_what_the_cli_and_viewer_read(name):
    # One grammar in every host: the core parses the text, so the string and the selector built
    # from Python calls pick the same ops, in save= and in select.
    _spec, _adapter, model, args = _built(name)
    full = tl.trace(model, args, backend=name)
    target = [op for op in full.ops if op.kind == "compute"][-2]
    text = f"label:{target.label} | (func:{target.func_name} & ~label:{target.label})"
    built = tl.label(target.label) | (tl.func(target.func_name) & ~tl.label(target.label))
    assert [op.label for op in full.select(text)] == [op.label for op in full.select(built)]
    assert target.label in [op.label for op in full.select(text)]
    narrow = tl.trace(model, args, backend=name, save=f"label:{target.label}")
    assert target.label in {op.label for op in narrow.saved_ops}
    assert {op.label for op in narrow.saved_ops if op.kind == "compute"} == {target.label}


@pytest.mark.parametrize("name", backend_params())
def test_one_predicate_reads_the_same_names_during_capture_and_on_the_trace(name):
    # out, value, shape, dtype, func_name, module and module_stack answer alike on a live op's
    # RecordContext and on a finished trace's Op: one tl.where serves save= and select.
    spec, _adapter, model, args = _built(name)
    full = tl.trace(model, args, backend=name)
    target = [op for op in full.ops if op.kind == "compute"][-2]

    def predicate(op):
        return (
            op.func_name == target.func_name
            and op.module == target.module
            and list(op.module_stack) == list(target.module_stack)
            and tuple(op.shape) == tuple(target.shape)
            and op.dtype == target.dtype
            and op.out is not None
            and op.value is op.out
        )

    chosen = [op.label for op in full.select(tl.where(predicate))]
    assert target.label in chosen
    if spec.capabilities.get("save_value_dependent"):
        narrow = tl.trace(model, args, backend=name, save=tl.where(predicate))
        assert [op.label for op in narrow.saved_ops if op.kind == "compute"] == chosen
    if spec.capabilities.get("intervene"):
        try:
            edited = tl.trace(model, args, backend=name, intervene=tl.when(predicate, tl.scale(1.0)))
        except BackendUnsupportedError as refused:
            # Backends whose values are lazy, or edited only at wrapped entry points, say so.
            assert refused.code == "value_dependent_predicate"
        else:
            assert [op.label for op in edited.ops if op.is_edited] == chosen


@pytest.mark.parametrize("name", backend_params())
def test_a_warning_from_the_capture_points_at_the_callers_line(name):
    _spec, _adapter, model, args = _built(name)
    with pytest.warns(tl.errors.SelectorMatchedNothingWarning) as caught:
        tl.trace(model, args, backend=name, save=tl.func("no_op_is_called_this"))
    assert {record.filename for record in caught} == {__file__}


@pytest.mark.filterwarnings("ignore::torchlens.errors.CaptureUnverifiedWarning")
@pytest.mark.parametrize("interruption", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("name", backend_params())
def test_an_exception_inside_the_forward_leaves_nothing_behind(name, interruption):
    spec, adapter, model, args = _built(name)
    before = _framework_namespace(spec)
    expected = tl.trace(model, args, backend=name).labels

    def raising(*inputs):
        model(*inputs)
        raise interruption("raised inside the forward")

    with pytest.raises(interruption):
        tl.trace(raising, args, backend=name)
    assert open_session_count() == 0
    assert _framework_namespace(spec) == before
    # The garbage collector, paused while a capture runs, is back on.
    assert gc.isenabled()
    assert tl.trace(model, args, backend=name).labels == expected


@pytest.mark.parametrize("name", backend_params())
def test_the_garbage_collector_is_paused_during_a_capture_and_restored_after(name):
    spec, adapter, model, args = _built(name)
    seen = []

    def watched(*inputs):
        seen.append(gc.isenabled())
        return model(*inputs)

    tl.trace(watched, args, backend=name)
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        tl.trace(model, args, backend=name)
        # A collector the caller turned off stays off.
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("name", backend_params())
def test_a_dropped_trace_is_freed_at_once_after_its_ops_were_read(name):
    """Reference counting alone frees a trace whose ops, params and layers were read (no
    cycle between a trace and its cached ops), while an op kept past its trace still works."""
    import weakref

    spec, adapter, model, args = _built(name)
    expected = tl.trace(model, args, backend=name)
    expected_parents = [[parent.label for parent in op.parents] for op in expected.ops]
    gc.disable()
    try:
        trace = tl.trace(model, args, backend=name)
        dropped = weakref.ref(trace)
        last = trace.ops[-1]
        assert trace.params is not None and trace.layers and trace[0].children is not None
        del trace
        assert dropped() is None
        assert [parent.label for parent in last.parents] == expected_parents[-1]
        assert last.saved == expected.ops[-1].saved
    finally:
        gc.enable()


# A plain callable hides a module's parameters from adapters that find them on the root (the
# NumPy adapter): that capture is honestly marked unverified, which is not what this test is about.
@pytest.mark.filterwarnings("ignore::torchlens.errors.CaptureUnverifiedWarning")
@pytest.mark.parametrize("name", backend_params())
def test_another_thread_running_the_model_is_not_recorded(name):
    spec, adapter, model, args = _built(name)
    alone = tl.trace(lambda *inputs: model(*inputs), args, backend=name)

    def with_a_neighbour(*inputs):
        # The neighbour runs on the caller's own (concrete) inputs while the capture is open.
        neighbour = threading.Thread(target=model, args=args)
        neighbour.start()
        neighbour.join()
        return model(*inputs)

    together = tl.trace(with_a_neighbour, args, backend=name)
    assert together.labels == alone.labels


@pytest.mark.parametrize("name", backend_params())
def test_every_action_applies_through_the_backend_hook_keeping_shape_and_dtype(name):
    spec, adapter, model, args = _built(name)
    value = adapter.output_leaves(adapter.reference_output(model, args, {}))[0]
    host = _host(adapter, value)
    expected = {
        "zero": (tl.zero_ablate(), numpy.zeros_like(host)),
        "scale": (tl.scale(2.0), host * 2.0),
        "add": (tl.add(1.0), host + 1.0),
        "clamp": (tl.clamp(min=-0.1, max=0.1), numpy.clip(host, -0.1, 0.1)),
        "mean": (tl.mean_ablate(), numpy.full_like(host, host.mean())),
        "replace": (tl.replace_with(numpy.ones(host.shape)), numpy.ones_like(host)),
    }
    for key, (action, wanted) in expected.items():
        replaced = adapter.apply_action(action, value)
        assert type(replaced) is type(value), key
        assert _host(adapter, replaced).dtype == host.dtype, key
        numpy.testing.assert_allclose(_host(adapter, replaced), wanted, rtol=1e-6, err_msg=key)
    doubled = adapter.apply_action(tl.when(tl.func("x"), lambda v: v * 2).action, value)
    numpy.testing.assert_allclose(_host(adapter, doubled), host * 2, rtol=1e-6)


@pytest.mark.parametrize("name", backend_params())
def test_a_list_argument_edited_after_the_call_still_validates(name):
    # MLX's nn.Upsample reshapes with a list and then edits that same list: replay must see the
    # list as it was when the op ran (the kit snapshots every mutable non-array argument).
    spec, adapter, _model, _args = _built(name)
    framework = importlib.import_module(spec.requirement.module)
    x = adapter.from_numpy(numpy.arange(6, dtype=numpy.float32).reshape(2, 3), "float32")

    def reshape(value, shape):
        # The framework's reshape function where it has one (torch, TensorFlow, Paddle, NumPy),
        # else the array's own method (JAX, MLX and tinygrad keep it elsewhere).
        function = getattr(framework, "reshape", None)
        return function(value, shape) if function is not None else value.reshape(shape)

    def edits_its_shape(value):
        shape = [3, 2]
        tall = reshape(value, shape)
        shape[0], shape[1] = 1, 6
        return reshape(tall, shape)

    trace = tl.trace(edits_its_shape, (x,), backend=name)
    assert [op.shape for op in trace.ops if op.kind == "compute"] == [(3, 2), (1, 6)]
    numpy.testing.assert_array_equal(
        _host(adapter, trace.outputs[0].out), numpy.arange(6, dtype=numpy.float32).reshape(1, 6)
    )
    assert trace.validate_forward_pass() is True


def _serving(capability):
    """The registered built backends whose declaration grants ``capability``."""
    return [
        case
        for case in backend_params()
        if tl.backends.get_spec(case.values[0]).capabilities.get(capability, False)
    ]


@pytest.mark.parametrize("name", _serving("stop_after"))
def test_a_stop_rule_that_matches_nothing_warns_and_the_whole_forward_runs(name):
    spec, adapter, model, args = _built(name)
    with pytest.warns(tl.errors.SelectorMatchedNothingWarning, match="stop_after="):
        trace = tl.trace(model, args, backend=name, stop_after=tl.func("no_such_function"))
    assert trace.outputs and trace.validate_forward_pass() is True


@pytest.mark.parametrize("name", _serving("derived_grads"))
def test_the_kit_refuses_grad_options_a_backend_cannot_honour_before_the_model_runs(name):
    # The kit's preflight (adapter_kit/preflight.py), not each backend: a foreign GradOptions, an
    # input position that names no floating input, and derived gradients with live edits.
    spec, adapter, model, args = _built(name)
    calls = []

    def counting(*inputs):
        calls.append(1)
        return model(*inputs)

    own = adapter.grad_options_type
    refusals = [(KitGradOptions(), {}, "option_unsupported")]
    if "input_grad_argnums" in {field.name for field in dataclasses.fields(own)}:
        refusals.append((own(input_grad_argnums=(len(args) + 3,)), {}, "option_value_invalid"))
    if spec.capabilities.get("stop_after"):
        refusals.append((own(), {"stop_after": tl.func("nothing")}, "option_unsupported"))
    for grad_options, extra, code in refusals:
        with pytest.raises(BackendUnsupportedError) as caught:
            tl.trace(counting, args, backend=name, capture=CaptureOptions(grad_options=grad_options), **extra)
        assert caught.value.code == code, (grad_options, extra)
        assert caught.value.framework == name
    assert calls == []
    assert open_session_count() == 0


@pytest.mark.parametrize("name", backend_params(built=False))
def test_a_planned_backend_refuses_before_anything_runs(name):
    calls = []
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(lambda x: calls.append(x), 1.0, backend=name)
    assert caught.value.code in ("framework_not_installed", "backend_not_built")
    assert caught.value.framework == name and not calls
