"""The tamper tasks (graduation item 4): a changed saved value, a stale-label sidecar (replay
data keyed to the wrong op), a stripped and a forged edit record must each fail validation, and
no op may count as a replayed pass without a replay. Each passes only when validation catches
the tampering; they reach into the trace's runtime replay data on purpose, as an attacker or a
bug would."""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

import torchlens as tl

from .tasks import Case, _computed, _select, task


def _values(trace: Any) -> Dict[int, Any]:
    """The values replay reads: the runtime copies where the backend keeps them, else the
    saved payloads (keyed by the same value ids)."""
    runtime = trace._runtime
    return runtime.values if runtime is not None and runtime.values is not None else trace._payloads


def _rejected(trace: Any) -> bool:
    return trace.validation_replay_status.state == "failed"


@task("tamper_saved_value")
def tamper_saved_value(case: Case) -> None:
    trace = case.trace()
    target = _select(trace, tl.func(case.model.func))[0]
    values = _values(trace)
    value_id = target._info["value"]
    values[value_id] = values[value_id] + 1.0
    status = trace.validation_replay_status
    assert status.state == "failed" and status.first_failed_op == target.label, status


@task("tamper_stale_sidecar")
def tamper_stale_sidecar(case: Case) -> None:
    # Two ops of one shape and dtype whose values differ trade their replay data, as a sidecar
    # keyed by stale labels would hand them over.
    trace = case.trace()
    values = _values(trace)
    ops = [op for op in _computed(trace) if op._info.get("value") in values]
    pair = next(
        (first, second)
        for index, first in enumerate(ops)
        for second in ops[index + 1 :]
        if first.shape == second.shape
        and first.dtype == second.dtype
        and not np.array_equal(
            case.host(values[first._info["value"]]), case.host(values[second._info["value"]])
        )
    )
    first, second = (op._info["value"] for op in pair)
    values[first], values[second] = values[second], values[first]
    assert _rejected(trace)


@task("tamper_stripped_edit")
def tamper_stripped_edit(case: Case) -> None:
    # The edit record is stripped everywhere: from the op (what users and files see) and from
    # the runtime's replay declaration, so the replacement claims to be what the op computed.
    edited = case.trace(intervene=tl.when(tl.func(case.model.func), tl.add(1.0)))
    for op in _select(edited, tl.func(case.model.func)):
        op._info["edits"] = []
        edited._runtime.edits.pop(op._info["value"], None)
    assert _rejected(edited)


@task("tamper_forged_edit")
def tamper_forged_edit(case: Case) -> None:
    # An op of a plain run claims an edit that never fired: validation must not pass a trace
    # whose record says a value was replaced when replay finds the plain value.
    trace = case.trace()
    target = _select(trace, tl.func(case.model.func))[0]
    target._info["edits"] = [("when(forged)", "scale(3.0)", "post")]
    assert trace.validate_forward_pass() is not True


@task("tamper_replay_without_record")
def tamper_replay_without_record(case: Case) -> None:
    # Without its replay record an op cannot be replayed, so it must not count as passed.
    trace = case.trace()
    target = _select(trace, tl.func(case.model.func))[0]
    trace._runtime.records.pop(target._info["value"])
    status = trace.validation_replay_status
    decision = next(decision for decision in status.decisions if decision[0] == target.label)
    assert decision[1] != "passed", decision
    assert status.state != "passed"
    assert status.replayed == sum(outcome == "passed" for _label, outcome, _ in status.decisions)
