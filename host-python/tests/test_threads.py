"""A capture belongs to its thread: several threads trace one model at once and get the same
trace as a single thread; a plain forward in another thread during a capture is untouched; a
nested ``tl.trace`` on the same thread is refused; every error is an ``Exception``."""

import threading

import pytest
import torch

import torchlens as tl
from conformance.models.torch import Mlp
from torchlens import errors

# Each thread has its own core: an instance per thread in the extension's Rust, the wasmtime-py
# host's own per-thread instances in Python (runtime.py). make test runs these under each host.
pytestmark = pytest.mark.both_hosts


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


def _framework_case(name):
    """``(forward, make_input, plain_result)`` of a small function in framework ``name``; the
    forward calls ``pause()`` between its ops (on threads that ask it to)."""
    import numpy as np

    if name == "torch":
        return (
            lambda x: torch.exp(_paused(torch.tanh(x)) * 2 + 1),
            lambda: torch.ones(2, 2),
            lambda y: y.numpy(),
        )
    if name == "paddle":
        paddle = pytest.importorskip("paddle")
        return (
            lambda x: paddle.exp(_paused(paddle.tanh(x)) * 2 + 1),
            lambda: paddle.ones([2, 2]),
            lambda y: y.numpy(),
        )
    if name == "mlx":
        mx = pytest.importorskip("mlx.core")
        return (lambda x: mx.exp(_paused(mx.tanh(x)) * 2 + 1), lambda: mx.ones((2, 2)), np.array)
    if name == "tinygrad":
        tinygrad = pytest.importorskip("tinygrad")
        return (
            lambda x: (_paused(x.tanh()) * 2 + 1).exp(),
            lambda: tinygrad.Tensor.ones(2, 2).contiguous(),
            lambda y: y.numpy(),
        )
    if name == "tf":
        tf = pytest.importorskip("tensorflow")
        return (lambda x: tf.exp(_paused(tf.tanh(x)) * 2 + 1), lambda: tf.ones((2, 2)), lambda y: y.numpy())
    jnp = pytest.importorskip("jax.numpy")
    return (lambda x: jnp.exp(_paused(jnp.tanh(x)) * 2 + 1), lambda: jnp.ones((2, 2)), np.asarray)


#: Thread name → (reached, resume) events: a forward running on that thread stops between its
#: ops until resumed. Other threads run straight through.
_PAUSES = {}


def _paused(value):
    events = _PAUSES.get(threading.current_thread().name)
    if events is not None:
        events[0].set()
        assert events[1].wait(30)
    return value


def _labels(trace):
    return [(op.label, op.func_name, tuple(op.shape)) for op in trace.ops]


# Paddle before TensorFlow: importing paddle after tensorflow crashes inside paddle.
FRAMEWORKS = ["torch", "paddle", "mlx", "tinygrad", "tf"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_overlapping_captures_and_a_plain_call_on_other_threads(framework):
    """A starts, B starts, A ends, B ends (not nested); meanwhile a plain call runs on the main
    thread. Every trace equals one taken alone; the plain call gives the plain result; nothing
    stays installed."""
    forward, make, as_numpy = _framework_case(framework)
    expected = _labels(tl.trace(forward, make()))
    plain_expected = as_numpy(forward(make()))
    _PAUSES.update({name: (threading.Event(), threading.Event()) for name in ("A", "B")})
    out = {}

    def run(name):
        try:
            out[name] = _labels(tl.trace(forward, make()))
        except BaseException as error:  # noqa: BLE001 - compared below
            out[name] = repr(error)

    first, second = (threading.Thread(target=run, args=(name,), name=name) for name in ("A", "B"))
    try:
        first.start()
        assert _PAUSES["A"][0].wait(30)
        second.start()
        # Backends that take turns keep B waiting for A; the others let it start now.
        _PAUSES["B"][0].wait(2)
        plain = as_numpy(forward(make()))
        _PAUSES["A"][1].set()
        first.join(30)
    finally:
        _PAUSES["A"][1].set()
        _PAUSES["B"][1].set()
        first.join(30)
        second.join(30)
        _PAUSES.clear()
    assert out == {"A": expected, "B": expected}
    assert (plain == plain_expected).all()
    assert _labels(tl.trace(forward, make())) == expected
    assert (as_numpy(forward(make())) == plain_expected).all()


def test_jax_traces_on_several_threads_at_once():
    """JAX installs no wrappers (it traces a jaxpr): threads trace concurrently."""
    forward, make, _ = _framework_case("jax")
    expected = _labels(tl.trace(forward, make()))
    results = []
    threads = [
        threading.Thread(target=lambda: results.extend(_labels(tl.trace(forward, make())) for _ in range(5)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 20
