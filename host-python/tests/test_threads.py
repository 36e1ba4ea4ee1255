"""A capture belongs to its thread: several threads trace one model at once and get the same
trace as a single thread; a plain forward in another thread during a capture is untouched; a
nested ``tl.trace`` on the same thread is refused; every error is an ``Exception``."""

import threading

import pytest
import torch
from models import Mlp

import torchlens as tl
from torchlens import errors


def _fingerprint(trace):
    """What must agree between two traces of the same model and input: every op's label,
    function, shape, dtype, parents and module, and every saved value."""
    rows = []
    for op in trace.ops:
        value = trace[op.label].out if op.saved else None
        rows.append(
            (
                op.label,
                op.func_name,
                tuple(op.shape),
                op.dtype,
                tuple(parent.label for parent in op.parents),
                op.module,
                None if value is None else value.detach().numpy().tobytes(),
            )
        )
    return rows


def test_eight_threads_fifty_traces_each_equal_a_single_threaded_trace():
    torch.manual_seed(0)
    model = Mlp().eval()
    x = torch.randn(2, 8)
    expected = _fingerprint(tl.trace(model, x))
    results, failures = [], []
    start = threading.Barrier(8)

    def worker():
        try:
            start.wait()
            for _ in range(50):
                results.append(_fingerprint(tl.trace(model, x)))
        except BaseException as error:  # noqa: BLE001 - reported below, with its type
            failures.append(repr(error))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(results) == 400
    assert all(result == expected for result in results)


class _Pausing(torch.nn.Module):
    """Stops mid-forward (on the tracing thread only) until the other thread has run."""

    def __init__(self, inner, reached, resume):
        super().__init__()
        self.inner, self.reached, self.resume = inner, reached, resume

    def forward(self, x):
        x = torch.relu(x)
        if threading.current_thread().name == "tracer":
            self.reached.set()
            assert self.resume.wait(30)
        return self.inner(x) * 2


def test_a_plain_forward_in_another_thread_during_a_trace_is_untouched():
    torch.manual_seed(0)
    reached, resume = threading.Event(), threading.Event()
    model = _Pausing(Mlp().eval(), reached, resume)
    x = torch.randn(2, 8)
    with torch.no_grad():
        plain_expected = model(x * 3)
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("trace", tl.trace(model, x)), name="tracer")
    thread.start()
    assert reached.wait(30)
    # The trace's hooks and mode are installed now; this thread runs the same modules.
    try:
        with torch.no_grad():
            plain = model(x * 3)
    finally:
        resume.set()
        thread.join()
    assert torch.equal(plain, plain_expected)
    # The model pauses only on the thread named "tracer": this one traces straight through.
    assert _fingerprint(out["trace"]) == _fingerprint(tl.trace(model, x))


def test_traces_and_their_values_can_be_used_from_another_thread():
    trace = tl.trace(Mlp().eval(), torch.randn(2, 8))
    seen = {}

    def reader():
        seen["labels"] = [op.label for op in trace.ops]
        seen["summary"] = trace.summary()
        try:
            trace["no_such_label"]
        except Exception as error:  # the package's errors are ordinary exceptions
            seen["error"] = error

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    assert seen["labels"] == [op.label for op in trace.ops]
    assert isinstance(seen["error"], errors.TorchLensError)


class _TracesInside(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Mlp().eval()

    def forward(self, x):
        return tl.trace(self.inner, x)


def test_a_nested_trace_on_the_same_thread_is_refused_with_a_code():
    with pytest.raises(errors.TorchLensError) as raised:
        tl.trace(_TracesInside(), torch.randn(2, 8))
    # The refusal reaches the caller itself, or as the cause of the forward's failure.
    refusal = raised.value if raised.value.code == "trace_nested" else raised.value.__cause__
    assert isinstance(refusal, errors.NestedTraceError)
    assert refusal.code == "trace_nested"
    # Nothing stays installed: the next trace works.
    assert len(tl.trace(Mlp().eval(), torch.randn(2, 8)).ops) > 0


def test_every_error_the_package_defines_is_an_exception():
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, BaseException)
    ]
    assert classes
    assert all(issubclass(value, Exception) for value in classes)


def test_errors_from_the_native_core_are_exceptions(tmp_path):
    path = tmp_path / "not.tlspec"
    path.write_bytes(b"\xff" * 64)
    try:
        tl.load(str(path))
    except Exception as error:
        assert isinstance(error, errors.TorchLensError) and error.code.startswith("tlspec_")
    else:
        raise AssertionError("a hostile file loaded")
