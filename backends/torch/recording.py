"""``tl.record`` on torch: record only the ops a static ``save=`` selects, many times, without
building a trace each time.

The first call for a model and an input signature runs one full ``tl.trace`` with the same
``save=``; it returns that call's values, and a plan is learned from it (``record_plan.py``:
each selected op by its innermost module call and its ordinal there). Later calls with the same
signature run the model under the plan (``record_run.py``: hooks on the planned modules only,
and a function mode only inside planned calls), with no core session and no per-op events.

Every value taken is checked against the plan (function, shape, dtype; every planned call must
run exactly the ops the trace saw). A forward that does not follow the plan has its values
thrown away and the call is answered by a full trace, which relearns the plan; a signature whose
plan failed twice is always traced. A value that an in-place op changed after it was taken is
answered the same way, and the new plan copies that value when it takes it. No value the plan
is not sure of is ever returned.

Selectors that depend on values (``tl.where``, callables) or on neighbouring ops
(``tl.followed_by``, ``tl.preceded_by``) are never planned: each call takes the full
``tl.trace`` path (which decides, today, that torch refuses them with a typed error)."""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

import torch

from torchlens.api import trace as full_trace
from torchlens.recording import ActivationRecord, Recording
from torchlens.trace import warn_matched_nothing

from .record_plan import Plan, plan_from_trace
from .record_run import run_plan

#: Plans kept per model and signature (least recently used dropped first).
PLANS_PER_MODEL = 8

#: A plan that failed its checks this many times is replaced by "always trace".
MISMATCHES_BEFORE_TRACING = 2

#: Model → {signature: Plan}; weak, so a model that goes away takes its plans with it.
_PLANS: weakref.WeakKeyDictionary[Any, OrderedDict] = weakref.WeakKeyDictionary()


def record(model: Any, args: tuple, kwargs: dict, selector: Any) -> Recording:
    """Records the ops ``selector`` selects on ``model(*args, **kwargs)`` (see the module
    docstring): from a plan when one matches the call's signature, else from a full trace."""
    key = _signature(model, args, kwargs, selector)
    plans = _plans_of(model) if key is not None else None
    plan = plans.get(key) if plans is not None else None
    mismatches, copied = 0, set()
    if plan is not None:
        plans.move_to_end(key)
        mismatches, copied = plan.mismatches, plan.copied
        if plan.calls is not None:
            values, output, overwritten = run_plan(plan, model, args, kwargs)
            if values is not None:
                return _recording(plan, values, output, selector)
            if overwritten:
                # Not a different forward: values to copy when taken, learned now.
                copied = copied | overwritten
            else:
                mismatches += 1
    recording, ops, matched = _record_by_trace(model, args, kwargs, selector)
    if plans is not None:
        new_plan = plan_from_trace(model, ops, matched, mismatches, copied)
        if mismatches >= MISMATCHES_BEFORE_TRACING:
            new_plan.calls = None
        plans[key] = new_plan
        while len(plans) > PLANS_PER_MODEL:
            plans.popitem(last=False)
    return recording


def _plans_of(model: Any) -> Optional[OrderedDict]:
    try:
        plans = _PLANS.get(model)
        if plans is None:
            plans = _PLANS[model] = OrderedDict()
        return plans
    except TypeError:
        return None  # a callable that cannot be weakly referenced: always traced


# ---- the signature a plan is valid for ----------------------------------------------------------


def _signature(model: Any, args: tuple, kwargs: dict, selector: Any) -> Optional[tuple]:
    """What must not change for a plan to hold: the inputs' structure, shapes, dtypes and devices
    (and plain scalar arguments, which may steer the forward), the selector, autograd's mode and
    every module's identity and train/eval flag. None for a selector that is never planned."""
    nodes, root = selector.arena()
    if any(kind in _UNPLANNED_NODES for kind, _ in nodes):
        return None
    parts: List[Any] = [_frozen(nodes), root, torch.is_grad_enabled(), torch.is_inference_mode_enabled()]
    _describe(args, parts)
    _describe(kwargs, parts)
    if isinstance(model, torch.nn.Module):
        parts.extend((id(module), module.training) for module in model.modules())
    return tuple(parts)


#: Selector nodes decided by values or by neighbouring ops: such selectors are never planned.
_UNPLANNED_NODES = frozenset({"where", "followed_by", "preceded_by"})

#: Argument types whose value (not only their type) goes into the signature.
_SCALARS = (bool, int, float, str, type(None))


def _describe(value: Any, parts: List[Any]) -> None:
    if isinstance(value, torch.Tensor):
        parts.append((tuple(value.shape), value.dtype, value.device, value.requires_grad, value.layout))
    elif isinstance(value, (tuple, list)):
        parts.append((type(value), len(value)))
        for item in value:
            _describe(item, parts)
    elif isinstance(value, dict):
        parts.append((dict, tuple(value)))
        for item in value.values():
            _describe(item, parts)
    elif isinstance(value, _SCALARS):
        parts.append((type(value), value))
    else:
        # Another object may steer the forward in ways the plan cannot see: only the very same
        # object reuses a plan.
        parts.append((type(value), id(value)))


def _frozen(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    return value


# ---- the recording -------------------------------------------------------------------------------


def _recording(plan: Plan, values: Dict[int, Any], output: Any, selector: Any) -> Recording:
    records = [
        ActivationRecord(
            target.label, target.func_name, target.scope, target.shape, target.dtype, values[index]
        )
        for index, target in enumerate(plan.targets)
    ]
    if not records:
        # warn ← _recording ← record ← the capability binding ← tl.record ← the caller's line
        warn_matched_nothing(selector, stacklevel=6)
    return Recording(records, output, "torch", from_plan=True)


def _record_by_trace(
    model: Any, args: tuple, kwargs: dict, selector: Any
) -> Tuple[Recording, List[Any], List[Any]]:
    """One full ``tl.trace`` with ``save=selector``: the recording of its selected values, the
    trace's ops and the selected ones (a plan is learned from them). Output nodes are left out:
    they hold no value of their own (the model's output is ``recording.output``)."""
    outputs: List[Any] = []
    traced, handle = _output_catcher(model, outputs)
    try:
        trace = full_trace(traced, args, kwargs, backend="torch", save=selector)
    finally:
        if handle is not None:
            handle.remove()
    ops = trace.ops
    if selector.predicates():
        # A value-dependent selector was decided live on each value: the saved computed ops
        # are exactly its matches (constants and buffers are kept for replay, not selected).
        matched = [op for op in ops if op.saved and op.kind in ("compute", "literal_producer")]
    else:
        matched = [
            ops[index] for index in trace._native.select(selector.arena(), []) if ops[index].kind != "output"
        ]
    records = [
        ActivationRecord(op.label, op.func_name, op.module, op.shape, op.dtype, op.out) for op in matched
    ]
    return Recording(records, outputs[-1], "torch", from_plan=False), ops, matched


def _output_catcher(model: Any, outputs: List[Any]) -> Tuple[Any, Any]:
    """The trace keeps only the selected values, so the model's output is caught on its way
    out: a forward hook on a module (it returns None, so the output is unchanged), a wrapper
    with the same signature around any other callable. Returns (what to trace, the hook)."""
    if isinstance(model, torch.nn.Module):
        return model, model.register_forward_hook(lambda module, args, output: outputs.append(output))

    @functools.wraps(model)
    def catching(*args: Any, **kwargs: Any) -> Any:
        output = model(*args, **kwargs)
        outputs.append(output)
        return output

    return catching, None
