"""The conformance tasks. Each task runs on one standard model of one backend and either
returns (the cell passed), raises ``AssertionError`` or any other error (failed), or is refused
with ``BackendUnsupportedError`` (unsupported when its code is registered). A task never reads
a capability flag: a refusal has to come from running the request. Tasks that need a public
name the package does not have yet list it in ``requires`` and are recorded as not_run.

The task names are the case ids' second half (``mlp/intervene``); the feature table and the
capability summary name them (``torchlens/backends/scorecard.py``)."""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple

import numpy as np

import torchlens as tl
from torchlens.options import CaptureOptions

from .models import BackendModels, StandardModel


@dataclass
class Case:
    """One cell's inputs: the backend, its models, the model under test and its protocol."""

    backend: str
    models: BackendModels
    model: StandardModel
    protocol: Any

    def build(self) -> Tuple[Any, tuple]:
        return self.model.build()

    def trace(self, model: Any = None, args: Any = None, **kwargs: Any) -> Any:
        if model is None:
            model, args = self.build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tl.trace(model, args, backend=self.backend, **kwargs)

    def host(self, value: Any) -> np.ndarray:
        return np.asarray(self.protocol.to_numpy(value))

    def output(self, model: Any, args: tuple) -> np.ndarray:
        """The model's own output (no TorchLens wrapper installed), on the host."""
        leaves = self.protocol.output_leaves(self.protocol.reference_output(model, args, {}))
        return np.concatenate([self.host(leaf).ravel() for leaf in leaves])

    def with_data(self, args: tuple, data: np.ndarray) -> tuple:
        """``args`` with the data input replaced by ``data``."""
        index = self.models.data_index
        return args[:index] + (self.models.to_array(data),) + args[index + 1 :]

    def data(self, args: tuple) -> np.ndarray:
        return self.host(args[self.models.data_index])


@dataclass(frozen=True)
class Task:
    name: str
    run: Callable[[Case], None]
    #: Public names (dotted, under ``torchlens``) the task needs; absent ones make it not_run.
    requires: Tuple[str, ...] = ()


TASKS: Dict[str, Task] = {}


def task(
    name: str, requires: Tuple[str, ...] = ()
) -> Callable[[Callable[[Case], None]], Callable[[Case], None]]:
    def register(run: Callable[[Case], None]) -> Callable[[Case], None]:
        TASKS[name] = Task(name, run, requires)
        return run

    return register


def _computed(trace: Any) -> list:
    return [op for op in trace.ops if op.kind not in ("input", "output", "constant", "param", "buffer")]


def _inner(trace: Any) -> list:
    """Every op but the inputs and outputs (constants a module reads are inside it too)."""
    return [op for op in trace.ops if op.kind not in ("input", "output")]


def _labels(ops: Any) -> set:
    return {op.label for op in ops}


def _select(trace: Any, selector: Any) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return trace.select(selector)


# ---- what each op records --------------------------------------------------------------------


@task("capture")
def capture(case: Case) -> None:
    model, args = case.build()
    trace = case.trace(model, args)
    expected = case.output(model, args)
    got = np.concatenate([case.host(op.out).ravel() for op in trace.outputs])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    for op in trace.ops:
        assert op.func_name and op.dtype, op
        if op.saved and op.kind != "output":
            assert case.host(op.out).shape == tuple(op.shape), op
    assert any(_in_module(op, case.model.module) for op in _computed(trace))


@task("source_lines")
def source_lines(case: Case) -> None:
    trace = case.trace()
    sources = [op.source for op in _computed(trace)]
    assert sources and all(source is not None for source in sources)
    for file, line, _function in sources:
        assert os.path.exists(file) and line > 0, (file, line)


# ---- selection ---------------------------------------------------------------------------------


@task("select_by_function")
def select_by_function(case: Case) -> None:
    trace = case.trace()
    chosen = _select(trace, tl.func(case.model.func))
    assert chosen and all(case.model.func in (op.func_name, op.op_type) for op in chosen)
    assert len(chosen) == sum(case.model.func in (op.func_name, op.op_type) for op in trace.ops)


def _in_module(op: Any, address: str) -> bool:
    return any(frame.split(":")[0] == address or frame.startswith(address + ".") for frame in op.module_stack)


@task("select_by_module")
def select_by_module(case: Case) -> None:
    trace = case.trace()
    chosen = _select(trace, tl.in_module(case.model.module))
    assert chosen and all(_in_module(op, case.model.module) for op in chosen)
    assert _labels(chosen) == _labels(op for op in _inner(trace) if _in_module(op, case.model.module))


@task("select_both")
def select_both(case: Case) -> None:
    trace = case.trace()
    by_function = _labels(_select(trace, tl.func(case.model.func)))
    by_module = _labels(_select(trace, tl.in_module(case.model.module)))
    either = _labels(_select(trace, tl.func(case.model.func) | tl.in_module(case.model.module)))
    both = _labels(_select(trace, tl.func(case.model.func) & tl.in_module(case.model.module)))
    assert either == by_function | by_module and both == by_function & by_module


@task("select_by_influence")
def select_by_influence(case: Case) -> None:
    # The ops a chosen op can reach and the ops that reach an output, by the core's influence
    # selectors, checked against walks of the recorded edges; then save= with a downstream term
    # keeps exactly what that selector picks on the full trace.
    trace = case.trace()
    start = _select(trace, tl.func(case.model.func))[0]
    output = trace.outputs[0]
    downstream = _labels(_select(trace, tl.downstream_of(tl.label(start.label))))
    upstream = _labels(_select(trace, tl.upstream_of(tl.label(output.label))))
    assert downstream == _walk(start, "children") == _labels(trace.descendants(start.label))
    assert upstream == _walk(output, "parents") == _labels(trace.ancestors(output.label))
    assert output.label in downstream
    selector = tl.downstream_of(tl.func(case.model.func))
    saved = case.trace(save=selector)
    kept = _labels(op for op in _computed(saved) if op.saved)
    assert kept and kept == _labels(op for op in _select(trace, selector) if op.kind != "output")


def _walk(op: Any, direction: str) -> set:
    """The labels of every op reachable from ``op`` along ``children`` or ``parents``."""
    seen, frontier = set(), [op]
    while frontier:
        for other in getattr(frontier.pop(), direction):
            if other.label not in seen:
                seen.add(other.label)
                frontier.append(other)
    return seen


# ---- saving and stopping -------------------------------------------------------------------


@task("save_selected")
def save_selected(case: Case) -> None:
    trace = case.trace(save=tl.func(case.model.func))
    chosen = _labels(_select(trace, tl.func(case.model.func)))
    assert chosen
    saved = _labels(op for op in _computed(trace) if op.saved)
    assert saved == chosen, (saved, chosen)


@task("save_value_dependent")
def save_value_dependent(case: Case) -> None:
    def chosen_by_value(op: Any) -> bool:
        return getattr(op, "func_name", None) == case.model.func

    trace = case.trace(save=tl.where(chosen_by_value))
    saved = _labels(op for op in _computed(trace) if op.saved)
    assert saved and saved == _labels(_select(trace, tl.func(case.model.func)))


@task("save_temporal")
def save_temporal(case: Case) -> None:
    # The window spans each standard model (they are a few dozen ops), so the module's ops
    # that some later op of the function follows are kept; the live decision must equal the
    # selection on a full trace.
    selector = tl.followed_by(tl.in_module(case.model.module), tl.func(case.model.func), within=50)
    trace = case.trace(save=selector)
    saved = _labels(op for op in _computed(trace) if op.saved)
    assert saved and saved <= _labels(_select(trace, tl.in_module(case.model.module)))
    assert saved == _labels(_select(case.trace(), selector))


@task("stop_after")
def stop_after(case: Case) -> None:
    full = case.trace()
    stopped = case.trace(stop_after=tl.func(case.model.func))
    assert stopped.is_stopped and stopped.stop_reason
    computed = _computed(stopped)
    assert computed[-1].func_name == case.model.func or computed[-1].op_type == case.model.func
    assert len(computed) < len(_computed(full))


def _recorded_value(recording: Any, label: str) -> Any:
    return recording[label].out


@task("record")
def record(case: Case) -> None:
    model, args = case.build()
    trace = case.trace(model, args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = tl.record(model, args, backend=case.backend, save=tl.func(case.model.func))
        again = tl.record(model, args, backend=case.backend, save=tl.func(case.model.func))
    for op in _select(trace, tl.func(case.model.func)):
        for recording in (first, again):
            np.testing.assert_allclose(
                case.host(_recorded_value(recording, op.label)), case.host(op.out), rtol=1e-5
            )


@task("streaming")
def streaming(case: Case) -> None:
    path = os.path.join(tempfile.mkdtemp(), "streamed.tlspec")
    trace = case.trace(streaming=tl.StreamingOptions(path=path))
    loaded = tl.load(path, verify=True)
    assert loaded.labels == trace.labels
    for op in _select(trace, tl.func(case.model.func)):
        np.testing.assert_array_equal(case.host(loaded[op.label].out), case.host(op.out))


# ---- drawing ---------------------------------------------------------------------------------


@task("draw")
def draw(case: Case) -> None:
    trace = case.trace()
    svg = trace.draw().svg
    assert "<svg" in svg
    assert all(op.label in svg for op in _select(trace, tl.func(case.model.func)))
    assert "<svg" in trace.draw(collapsed=True).svg


def _backward(trace: Any) -> None:
    """The user's own backward pass on the trace's output (the summed output as the loss)."""
    trace.output.sum().backward()


def _grad_trace(case: Case) -> Any:
    """A capture asked to record the backward pass (``save_grads``), then a backward run on it."""
    trace = case.trace(capture=CaptureOptions(extra={"save_grads": True}))
    _backward(trace)
    return trace


@task("save_grads")
def save_grads(case: Case) -> None:
    trace = _grad_trace(case)
    assert trace.has_backward_pass and trace.saved_grad_ops


@task("draw_backward")
def draw_backward(case: Case) -> None:
    trace = _grad_trace(case)
    assert "<svg" in trace.draw(backward=True).svg


@task("backward_ready")
def backward_ready(case: Case) -> None:
    trace = case.trace(capture=CaptureOptions(backward_ready=True))
    _backward(trace)
    assert trace.has_backward_pass


# ---- edits -----------------------------------------------------------------------------------


def _constant_rows(values: np.ndarray) -> bool:
    """Every position of every output equals the first one: what zeroing the model's last
    activation leaves in each standard model (only the final bias)."""
    flat = values.reshape(-1, values.shape[-1])
    return bool(np.allclose(flat, flat[:1], atol=1e-6))


def _check_zeroed(case: Case, edited: Any) -> None:
    ops = _select(edited, tl.func(case.model.func))
    assert ops and all(op.is_edited and not case.host(op.out).any() for op in ops)
    assert all(_constant_rows(case.host(op.out)) for op in edited.outputs)


@task("intervene")
def intervene(case: Case) -> None:
    edited = case.trace(intervene=tl.when(tl.func(case.model.func), tl.zero_ablate()))
    _check_zeroed(case, edited)


@task("edit_finished_trace")
def edit_finished_trace(case: Case) -> None:
    model, args = case.build()
    trace = case.trace(model, args)
    before = [case.host(op.out).copy() for op in trace.outputs]
    edited = trace.fork().do(tl.when(tl.func(case.model.func), tl.zero_ablate()))
    _check_zeroed(case, edited)
    # The original trace is untouched.
    for op, value in zip(trace.outputs, before):
        np.testing.assert_array_equal(case.host(op.out), value)


@task("patching", requires=("patch_from",))
def patching(case: Case) -> None:
    model, args = case.build()
    clean = case.trace(model, args)
    corrupted = case.trace(model, case.with_data(args, case.data(args) + 1.0))
    patched = corrupted.fork().do(tl.when(tl.func(case.model.func), tl.patch_from(clean)))
    for op, reference in zip(patched.outputs, clean.outputs):
        np.testing.assert_allclose(case.host(op.out), case.host(reference.out), rtol=1e-5, atol=1e-6)


# ---- validation ----------------------------------------------------------------------------


@task("validation_replay")
def validation_replay(case: Case) -> None:
    model, args = case.build()
    trace = case.trace(model, args)
    assert trace.validation_replay_status.state == "passed", trace.validation_replay_status
    assert trace.validate_forward_pass() is True


# ---- diagnostics -------------------------------------------------------------------------------


@task("debug_nan")
def debug_nan(case: Case) -> None:
    model, args = case.build()
    data = case.data(args).astype(np.float32)
    data.flat[0] = np.nan
    trace = case.trace(model, case.with_data(args, data))
    finding = tl.debug.find_nan(trace)
    assert finding.found and "nan" in finding.kind
    first = next(
        op
        for op in trace.ops
        if op.kind not in ("input", "output") and op.saved and np.isnan(case.host(op.out)).any()
    )
    assert finding.label == first.label
    clean = tl.debug.find_nan(case.trace(model, args))
    assert not clean.found


@task("debug_dead_units")
def debug_dead_units(case: Case) -> None:
    trace = case.trace()
    ops = _select(trace, tl.func(case.model.func))
    rows = {row.label: row for row in tl.debug.dead_units(trace, dim=-1)}
    for op in ops:
        value = case.host(op.out)
        if value.ndim < 2:
            continue
        flat = np.moveaxis(value, -1, 0).reshape(value.shape[-1], -1)
        dead = tuple(int(i) for i in np.nonzero(flat.max(axis=1) <= 0.0)[0])
        assert rows[op.label].dead_indices == dead


@task("debug_input_shape", requires=("debug.infer_input_shape",))
def debug_input_shape(case: Case) -> None:
    model, args = case.build()
    guess = tl.debug.infer_input_shape(model)
    data = case.data(args)
    # The layer fixes one axis (channels, features); the other sizes are conventional, and
    # the guess must run the model.
    if guess.feature_axis is not None:
        assert guess.shape[guess.feature_axis] == data.shape[guess.feature_axis]
    case.trace(model, case.with_data(args, np.zeros(guess.shape, dtype=data.dtype)))


# ---- gradients -------------------------------------------------------------------------------


@task("derived_grads")
def derived_grads(case: Case) -> None:
    model, args = case.build()
    options = case.models.grad_options(model, args)
    trace = case.trace(model, args, capture=CaptureOptions(grad_options=options))
    gradient = case.host(trace.autograd.derived_grads[case.models.grad_key])
    data = case.data(args).astype(np.float64)
    assert gradient.shape == data.shape
    # A central difference of the summed output along a fixed direction.
    direction = np.random.default_rng(0).standard_normal(data.shape)
    step = 1e-3
    plus = case.output(model, case.with_data(args, (data + step * direction).astype(np.float32))).sum()
    minus = case.output(model, case.with_data(args, (data - step * direction).astype(np.float32))).sum()
    numeric = (plus - minus) / (2 * step)
    assert np.isclose(float((gradient * direction).sum()), numeric, rtol=2e-2, atol=2e-3), (
        float((gradient * direction).sum()),
        numeric,
    )
