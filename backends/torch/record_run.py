"""One forward under a ``tl.record`` plan: the model runs as it is, with a pre-hook and a forward
hook on the planned modules only. A planned call opens a region: global module hooks give every
call inside it a frame of its own, and a function mode, pushed only while the innermost open
call is a planned one, counts that call's own ops and takes the planned ones. The region closes
when the call that opened it returns; outside it nothing of TorchLens runs. Hooks act only on
the thread that records."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
from torch.overrides import TorchFunctionMode

from torchlens.adapter_kit.structures import arrays_in

from .dtypes import name_of
from .naming import func_name
from .record_plan import CallPlan, Plan, Target

#: The switch of the attention fast path (torch 2.1 and later; earlier ones have no switch).
_FAST_PATH = getattr(torch.backends, "mha", None)


def run_plan(
    plan: Plan, model: Any, args: tuple, kwargs: dict
) -> Tuple[Optional[Dict[int, Any]], Any, Set[str]]:
    """Runs the model once under ``plan``: (the values by record position, or None when the
    forward did not follow the plan; the model's output; labels of kept values that an in-place
    op changed after they were taken). The model has run, unless a planned module is gone."""
    assert plan.calls is not None
    calls: Dict[Any, Dict[int, CallPlan]] = {}
    for reference, number, call_plan in plan.calls:
        module = model if reference is None else reference()
        if module is None:
            return None, None, set()  # the planned module is gone: nothing ran
        calls.setdefault(module, {})[number] = call_plan
    run = _PlannedRun(calls)
    if plan.inputs:
        run.take_inputs(plan.inputs, model, args, kwargs)
    output = run.forward(model, args, kwargs)
    if run.failed or len(run.values) != len(plan.targets):
        return None, output, set()
    overwritten = {
        target.label
        for target in plan.targets
        if target.index in run.versions and run.values[target.index]._version != run.versions[target.index]
    }
    return (None if overwritten else run.values), output, overwritten


class _Frame:
    """One module call open in the region: its plan (None: nothing planned in it), how many
    ops it has run itself, and its next planned op."""

    __slots__ = ("plan", "count", "next")

    def __init__(self, plan: Optional[CallPlan]) -> None:
        self.plan = plan
        self.count = 0
        self.next = 0


_UNPLANNED = _Frame(None)


class _PlannedRun:
    """The state of one planned forward (see the module docstring)."""

    def __init__(self, calls: Dict[Any, Dict[int, CallPlan]]) -> None:
        self.calls = calls
        self.call_counts: Dict[Any, int] = {}
        self.frames: List[_Frame] = []
        #: Record position → the value taken.
        self.values: Dict[int, Any] = {}
        #: Record position → version counter of a kept (uncopied) value when it was taken.
        self.versions: Dict[int, int] = {}
        self.failed = False
        self.owner = threading.get_ident()
        self.mode = _TakingMode(self)
        #: The module whose call opened the region, and how many of its own calls are open
        #: inside that one (a module that calls itself).
        self.outer: Any = None
        self.outer_nesting = 0
        self.nested_hooks: Tuple[Any, ...] = ()
        #: Whether the mode is pushed: only while the innermost open call is a planned one, so
        #: the ops of unplanned calls inside the region run without it.
        self.counting = False

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
                    # First among the module's hooks, as the trace's module hooks are: ops in
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

    def take_inputs(self, targets: List[Target], model: Any, args: tuple, kwargs: dict) -> None:
        """Model inputs, in the order the trace declares them: each tensor once, and not the
        model's own parameters (the trace declares those as parameters first)."""
        unique: Dict[int, torch.Tensor] = {}
        owned = None
        for tensor in arrays_in(list(args) + list(kwargs.values()), torch.Tensor):
            if isinstance(tensor, torch.nn.Parameter) and isinstance(model, torch.nn.Module):
                if owned is None:
                    owned = {id(param) for param in model.parameters()}
                if id(tensor) in owned:
                    continue
            unique.setdefault(id(tensor), tensor)
        tensors = list(unique.values())
        for target in targets:
            if target.ordinal < len(tensors):
                self.keep(target, tensors[target.ordinal])
            else:
                self.failed = True

    # ---- hooks --------------------------------------------------------------------------------

    def pre_hook(self, module: Any, args: Any) -> None:
        if threading.get_ident() != self.owner:
            return
        number = self.call_counts.get(module, 0) + 1
        self.call_counts[module] = number
        plan = self.calls[module].get(number)
        if self.outer is not None:
            if module is self.outer:
                self.outer_nesting += 1
            if plan is not None and not self.nested_hooks:
                # Nested in a call the trace saw no nested call in: not the forward it saw.
                self.failed = True
            elif plan is not None:
                # The global pre-hook (it runs first) opened this call's frame.
                self.frames[-1] = _Frame(plan)
                self.count_ops(True)
        elif plan is not None:
            self.open(module, plan)

    def post_hook(self, module: Any, args: Any, output: Any) -> None:
        if threading.get_ident() != self.owner or module is not self.outer:
            return
        if self.outer_nesting:
            self.outer_nesting -= 1
        else:
            self.close()

    def nested_pre_hook(self, module: Any, args: Any) -> None:
        if threading.get_ident() == self.owner:
            self.frames.append(_UNPLANNED)
            self.count_ops(False)

    def nested_post_hook(self, module: Any, args: Any, output: Any) -> None:
        # The outer call's own frame (the first) is closed by its module's forward hook.
        if threading.get_ident() == self.owner and len(self.frames) > 1:
            self.finish(self.frames.pop())
            self.count_ops(self.frames[-1].plan is not None)

    # ---- the region ------------------------------------------------------------------------------

    def open(self, module: Any, plan: CallPlan) -> None:
        self.outer = module
        self.outer_nesting = 0
        self.frames.append(_Frame(plan))
        if plan.nested:
            # Without nested calls in the trace (a leaf module) no frames are needed: ops of an
            # unexpected nested call would count in this call, and its count would not match.
            hooks = torch.nn.modules.module
            self.nested_hooks = (
                hooks.register_module_forward_pre_hook(self.nested_pre_hook),
                hooks.register_module_forward_hook(self.nested_post_hook),
            )
        self.count_ops(True)

    def count_ops(self, counting: bool) -> None:
        """Pushes or pops the mode (popping and pushing again costs less than passing every op
        of an unplanned call through Python)."""
        if counting != self.counting:
            self.counting = counting
            if counting:
                self.mode.__enter__()
            else:
                self.mode.__exit__(None, None, None)

    def close(self) -> None:
        self.count_ops(False)
        for handle in self.nested_hooks:
            handle.remove()
        self.nested_hooks = ()
        self.outer = None
        if self.frames:
            self.finish(self.frames.pop())
        if self.frames:
            self.failed = True  # calls left open: the forward did not run as planned
            self.frames.clear()

    def finish(self, frame: _Frame) -> None:
        """A call ends: a planned one must have run every op the trace saw, and no other."""
        plan = frame.plan
        if plan is not None and (frame.count != plan.total or frame.next != len(plan.targets)):
            self.failed = True

    # ---- taking values ------------------------------------------------------------------------------

    def take(self, target: Target, func: Any, args: tuple, kwargs: dict, value: Any) -> None:
        """At the planned op: its value (``value``), or for a constant or buffer the argument
        it was read from, when the op is the one the trace saw there."""
        if target.kind == "leaf":
            if func_name(func) != target.reader:
                self.failed = True
                return
            position = target.position
            if position < len(args):
                value = args[position]
            else:
                keywords = list(kwargs.values())
                value = keywords[position - len(args)] if position - len(args) < len(keywords) else None
            if not isinstance(value, torch.Tensor):
                self.failed = True
                return
        elif func_name(func) != target.func_name:
            self.failed = True
            return
        self.keep(target, value)

    def keep(self, target: Target, value: torch.Tensor) -> None:
        if value.shape != target.shape or name_of(value.dtype) != target.dtype:
            self.failed = True
            return
        kept = value.detach()
        if target.copy or target.kind == "leaf" or kept.is_inference():
            # A trace copies constants and buffers as they are read; other values only when an
            # in-place op would overwrite them. Inference tensors have no version counter to
            # check, so they are copied too.
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
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
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
            self.run.take(target, func, args, kwargs, results[target.ordinal - start])
            frame.next += 1
        return out
