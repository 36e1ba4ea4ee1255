"""``tl.record`` on torch: record only the ops a static ``save=`` selects, many times, without
building a trace each time.

The first call for a model and an input signature runs one full ``tl.trace`` with the same
``save=``: it returns that call's values and learns a plan. Each selected op is named by the
innermost module call that ran it (module object and call number) and its ordinal among the
ops that call ran itself (ops of nested calls excluded), exactly as the trace counts ops.

Later calls with the same signature run the plain model with a forward pre-hook and a forward
hook on the planned modules only. The pre-hook of a planned call pushes a function mode and
global module hooks, which are popped again when the outermost planned call returns: outside
planned calls the model runs untouched, with no core session and no per-op events. Inside, the
mode counts ops per call and takes the planned ones, after checking each is what the plan
expects (function name, shape, dtype) and that every planned call ran exactly as many ops as
in the trace. Anything else (a different op, a call that did not happen, a kept value changed in
place afterwards) throws the values away and runs the full trace again, which also relearns the
plan; a signature whose plan fails twice is always traced. No value the plan is not sure of is
ever returned.

Selectors that depend on values (``tl.where``, callables) or on neighbouring ops
(``tl.followed_by``, ``tl.preceded_by``) are never planned: each call takes the full
``tl.trace`` path (which decides, today, that torch refuses them with a typed error)."""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from torchlens.recording import ActivationRecord, Recording
from torchlens.trace import warn_matched_nothing

from .dtypes import name_of
from .naming import func_name

#: Plans kept per model and signature (least recently used dropped first).
PLANS_PER_MODEL = 8

#: A plan that failed its checks this many times is replaced by "always trace".
MISMATCHES_BEFORE_TRACING = 2

#: Model → {signature: _Plan}; weak, so a model that goes away takes its plans with it.
_PLANS: weakref.WeakKeyDictionary[Any, OrderedDict] = weakref.WeakKeyDictionary()


def record(model: Any, args: tuple, kwargs: dict, selector: Any) -> Recording:
    """Records the ops ``selector`` selects on ``model(*args, **kwargs)`` (see the module
    docstring): from a plan when one matches the call's signature, else from a full trace."""
    key = _signature(model, args, kwargs, selector)
    plans = _plans_of(model) if key is not None else None
    plan = plans.get(key) if plans is not None else None
    mismatches = 0
    if plan is not None:
        plans.move_to_end(key)
        if plan.calls is not None:
            recording = plan.run(model, args, kwargs, selector)
            if recording is not None:
                return recording
            mismatches = plan.mismatches + 1
        else:
            mismatches = plan.mismatches
    recording, ops, matched = _record_by_trace(model, args, kwargs, selector)
    if plans is not None:
        plans[key] = _plan_from_trace(model, ops, matched, mismatches)
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


# ---- learning a plan from a trace ---------------------------------------------------------------


class _Target:
    """One selected op as the plan finds it again: its ordinal among the ops its innermost module
    call runs itself, what it must look like, and its record's position and names."""

    __slots__ = ("index", "ordinal", "label", "func_name", "scope", "shape", "dtype", "copy")

    def __init__(self, index: int, ordinal: int, op: Any, copy: bool) -> None:
        self.index = index
        self.ordinal = ordinal
        self.label = op.label
        self.func_name = op.func_name
        #: The innermost module call, ``address:call``.
        self.scope = op.module
        self.shape = op.shape
        self.dtype = op.dtype
        #: Whether an in-place op later in the forward may overwrite the value: then it is copied
        #: when taken; otherwise the model's own tensor is kept and its version checked at the end.
        self.copy = copy


class _CallPlan:
    """The planned ops of one module call, in capture order, and how many ops the call runs
    itself (nested calls excluded)."""

    __slots__ = ("targets", "total")

    def __init__(self, targets: List[_Target], total: int) -> None:
        self.targets = targets
        self.total = total


class _Plan:
    """The plan of one signature. ``calls``: (the module, by weak reference, or None for the
    root; its call number; that call's plan); None when the signature is always traced."""

    __slots__ = ("calls", "targets", "mismatches")

    def __init__(
        self,
        calls: Optional[List[Tuple[Optional[weakref.ref], int, _CallPlan]]],
        targets: List[_Target],
        mismatches: int,
    ) -> None:
        self.calls = calls
        self.targets = targets
        self.mismatches = mismatches

    def run(self, model: Any, args: tuple, kwargs: dict, selector: Any) -> Optional[Recording]:
        """The recording of this call, or None when the plan did not hold (the model has run;
        none of its values is returned)."""
        assert self.calls is not None
        calls: Dict[Any, Dict[int, _CallPlan]] = {}
        for reference, number, call_plan in self.calls:
            module = model if reference is None else reference()
            if module is None:
                return None  # the planned module is gone
            calls.setdefault(module, {})[number] = call_plan
        run = _PlannedRun(calls)
        output = run.forward(model, args, kwargs)
        values = run.values
        if run.failed or len(values) != len(self.targets):
            return None
        for index, version in run.versions.items():
            if values[index]._version != version:
                return None  # changed in place after it was taken: the value is gone
        records = [
            ActivationRecord(
                target.label, target.func_name, target.scope, target.shape, target.dtype, values[target.index]
            )
            for target in self.targets
        ]
        if not records:
            warn_matched_nothing(selector, stacklevel=6)
        return Recording(records, output, "torch", from_plan=True)


def _record_by_trace(
    model: Any, args: tuple, kwargs: dict, selector: Any
) -> Tuple[Recording, List[Any], List[Any]]:
    """One full ``tl.trace`` with ``save=selector``: the recording of its selected values, the
    trace's ops and the selected ones (a plan is learned from them)."""
    from torchlens.api import trace as full_trace

    outputs: List[Any] = []
    traced, handle = _output_catcher(model, outputs)
    try:
        trace = full_trace(traced, args, kwargs, backend="torch", save=selector)
    finally:
        if handle is not None:
            handle.remove()
    ops = trace.ops
    matched = [ops[index] for index in trace._native.select(selector.arena(), [])]
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


def _plan_from_trace(model: Any, ops: List[Any], matched: List[Any], mismatches: int) -> _Plan:
    """Where each selected op (``matched``, among the trace's ``ops``) is: innermost call
    (module and call number) and ordinal within it. Always traced when some selected op is not
    a computed value (an input or output node, a constant, a buffer) or ran in a module the
    model does not hold (one built in the forward), or when plans for this signature failed too
    often."""
    ordinals: Dict[int, int] = {}
    totals: Dict[str, int] = {}
    last_in_place = -1
    for op in ops:
        if op.kind in _OP_KINDS:
            scope = op.module
            ordinals[op.index] = totals.get(scope, 0)
            totals[scope] = ordinals[op.index] + 1
            if op.in_place:
                last_in_place = op.index
    targets = [
        _Target(index, ordinals.get(op.index, -1), op, op.index < last_in_place)
        for index, op in enumerate(matched)
    ]
    plan = _Plan(None, targets, mismatches)
    if mismatches >= MISMATCHES_BEFORE_TRACING or any(op.kind not in _OP_KINDS for op in matched):
        return plan
    by_scope: Dict[str, List[_Target]] = {}
    for target in targets:
        by_scope.setdefault(target.scope, []).append(target)
    calls = []
    for scope, scoped in by_scope.items():
        # ``address:call``; the root's own ops are in ``self``, its only call.
        address, _, number = scope.partition(":")
        module = _module_at(model, address)
        if module is None:
            return plan
        reference = None if module is model else weakref.ref(module)
        calls.append((reference, int(number or 1), _CallPlan(scoped, totals[scope])))
    plan.calls = calls
    return plan


#: The kinds of trace ops a torch function call produced (one per tensor it returned): the ops
#: the plan counts. Inputs, outputs, constants and buffers are declared, not run.
_OP_KINDS = ("compute", "literal_producer")


def _module_at(model: Any, address: str) -> Any:
    if address == "self":
        return model
    if not isinstance(model, torch.nn.Module):
        return None
    try:
        return model.get_submodule(address)
    except AttributeError:
        return None


# ---- recording with a plan -----------------------------------------------------------------------


class _Frame:
    """One module call open while a planned call runs: its plan (None: nothing planned in it),
    how many ops it has run itself, and the next planned op to take."""

    __slots__ = ("plan", "count", "next")

    def __init__(self, plan: Optional[_CallPlan]) -> None:
        self.plan = plan
        self.count = 0
        self.next = 0


_UNPLANNED = _Frame(None)

#: The switch of the attention fast path (torch 2.1 and later; earlier ones have no switch).
_FAST_PATH = getattr(torch.backends, "mha", None)


class _PlannedRun:
    """One forward under a plan. A pre-hook on each planned module counts its calls; a planned
    call opens the region (the counting mode and global module hooks, which give every call
    inside a frame of its own) unless one is open already, and its forward hook closes it. Hooks
    act only on the thread that records."""

    def __init__(self, calls: Dict[Any, Dict[int, _CallPlan]]) -> None:
        self.calls = calls
        self.call_counts: Dict[Any, int] = {}
        self.frames: List[_Frame] = []
        self.values: Dict[int, Any] = {}
        #: Position → version counter of a kept (uncopied) value when it was taken.
        self.versions: Dict[int, int] = {}
        self.failed = False
        self.owner = threading.get_ident()
        self.mode = _TakingMode(self)
        #: The module whose planned call opened the region, and its calls open inside that one.
        self.outer: Any = None
        self.outer_nesting = 0
        self.nested_hooks: Tuple[Any, ...] = ()

    def forward(self, model: Any, args: tuple, kwargs: dict) -> Any:
        handles = []
        # A trace runs the whole forward under a function mode, which turns off the fused fast
        # path of MultiheadAttention and the Transformer layers; this run must compute what the
        # trace computed, so the fast path is off while it runs (a process-wide switch).
        fast_path = _FAST_PATH is not None and _FAST_PATH.get_fastpath_enabled()
        if fast_path:
            _FAST_PATH.set_fastpath_enabled(False)
        try:
            root_is_module = isinstance(model, torch.nn.Module)
            for module in self.calls:
                if module is not model or root_is_module:
                    # First among the module's hooks, as the trace's global hooks are: ops in
                    # the user's own pre-hooks count as the call's, those in forward hooks do not.
                    handles.append(module.register_forward_pre_hook(self.pre_hook, prepend=True))
                    handles.append(module.register_forward_hook(self.post_hook, prepend=True))
            if not root_is_module and model in self.calls:
                # A plain callable's own ops: the region spans the whole call.
                self.pre_hook(model, args)
                output = model(*args, **kwargs)
                self.post_hook(model, args, output)
            else:
                output = model(*args, **kwargs)
        finally:
            if fast_path:
                _FAST_PATH.set_fastpath_enabled(True)
            for handle in handles:
                handle.remove()
            if self.outer is not None:
                # The forward raised inside a planned call: take the region down.
                self.failed = True
                self.close()
        return output

    def pre_hook(self, module: Any, args: Any) -> None:
        if threading.get_ident() != self.owner:
            return
        number = self.call_counts.get(module, 0) + 1
        self.call_counts[module] = number
        plan = self.calls[module].get(number)
        if self.outer is not None:
            if module is self.outer:
                self.outer_nesting += 1
            if plan is not None:
                # The global pre-hook (it runs first) opened this call's frame.
                self.frames[-1] = _Frame(plan)
        elif plan is not None:
            self.open(module, plan)

    def post_hook(self, module: Any, args: Any, output: Any) -> None:
        if threading.get_ident() != self.owner or module is not self.outer:
            return
        if self.outer_nesting:
            self.outer_nesting -= 1
        else:
            self.close()

    def open(self, module: Any, plan: _CallPlan) -> None:
        self.outer = module
        self.outer_nesting = 0
        self.frames.append(_Frame(plan))
        hooks = torch.nn.modules.module
        self.nested_hooks = (
            hooks.register_module_forward_pre_hook(self.nested_pre_hook),
            hooks.register_module_forward_hook(self.nested_post_hook),
        )
        self.mode.__enter__()

    def close(self) -> None:
        self.mode.__exit__(None, None, None)
        for handle in self.nested_hooks:
            handle.remove()
        self.nested_hooks = ()
        self.outer = None
        if self.frames:
            self.finish(self.frames.pop())
        if self.frames:
            self.failed = True  # calls left open: the forward did not run as planned
            self.frames.clear()

    def nested_pre_hook(self, module: Any, args: Any) -> None:
        if threading.get_ident() == self.owner:
            self.frames.append(_UNPLANNED)

    def nested_post_hook(self, module: Any, args: Any, output: Any) -> None:
        # The outer call's own frame (the last one) is closed by its module's forward hook.
        if threading.get_ident() == self.owner and len(self.frames) > 1:
            self.finish(self.frames.pop())

    def finish(self, frame: _Frame) -> None:
        """A call ends: a planned one must have run every op the trace saw, and no other."""
        plan = frame.plan
        if plan is not None and (frame.count != plan.total or frame.next != len(plan.targets)):
            self.failed = True

    def take(self, target: _Target, func: Any, value: Any) -> None:
        """The op at a planned position: kept when it is the op the trace saw there."""
        if (
            func_name(func) != target.func_name
            or value.shape != target.shape
            or name_of(value.dtype) != target.dtype
        ):
            self.failed = True
            return
        kept = value.detach()
        if target.copy:
            kept = kept.clone()
        else:
            self.versions[target.index] = kept._version
        self.values[target.index] = kept


class _TakingMode(TorchFunctionMode):
    """Counts the ops of the innermost open call as the trace counts them (one per tensor an op
    returns) and hands the planned ones to the run. Torch disables the mode while it runs, so
    ops inside an op are not counted, as in a trace."""

    def __init__(self, run: _PlannedRun) -> None:
        super().__init__()
        self.run = run
        self.frames = run.frames

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        frame = self.frames[-1]
        plan = frame.plan
        if plan is None:
            return out
        if isinstance(out, torch.Tensor):
            results: tuple = (out,)
        elif isinstance(out, (tuple, list)):
            results = tuple(item for item in out if isinstance(item, torch.Tensor))
        elif out is None and args and isinstance(args[0], torch.Tensor) and func_name(func) == "__setitem__":
            results = (args[0],)
        else:
            return out
        start = frame.count
        frame.count = end = start + len(results)
        targets = plan.targets
        while frame.next < len(targets) and targets[frame.next].ordinal < end:
            target = targets[frame.next]
            self.run.take(target, func, results[target.ordinal - start])
            frame.next += 1
        return out
