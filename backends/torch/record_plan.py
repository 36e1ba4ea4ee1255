"""A ``tl.record`` plan, learned from one full trace: where each selected op is, so that later
forwards can take its value without a trace.

An op computed by a torch function is found again by its innermost module call (the module
object and the call number) and its ordinal among the ops that call runs itself, counted as
the trace counts them (one per tensor a function returns; ops of nested calls excluded). A
constant or buffer the trace declared is taken from the argument list of the op that first read
it (the next op of its call), a model input from the flattened inputs."""

from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

import torch

#: The kinds of trace ops a torch function call produced: the ops a plan counts.
OP_KINDS = ("compute", "literal_producer")

#: Values a trace declares when an op reads them (copied as they are then).
LEAF_KINDS = ("constant", "buffer")

#: Functions whose output may share storage with their first argument: an in-place op on one
#: changes the other. Unknown functions count as allocating; a value overwritten all the same
#: is caught by its version counter, and the relearned plan copies it.
ALIASING = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "swapaxes",
        "swapdims",
        "t",
        "T",
        "mT",
        "H",
        "mH",
        "permute",
        "movedim",
        "moveaxis",
        "expand",
        "expand_as",
        "narrow",
        "select",
        "__getitem__",
        "chunk",
        "split",
        "split_with_sizes",
        "tensor_split",
        "unbind",
        "unfold",
        "diagonal",
        "as_strided",
        "detach",
        "data",
        "contiguous",
        "to",
        "type",
        "type_as",
        "float",
        "double",
        "half",
        "cpu",
        "cuda",
        "real",
        "imag",
        "view_as_real",
        "view_as_complex",
        "alias",
    }
)


class Target:
    """One selected op as a plan finds it again. ``kind``: ``op`` (taken from the op at
    ``ordinal`` of its call), ``leaf`` (a constant or buffer: the argument at ``position`` of
    the op at ``ordinal``, whose function is ``reader``), ``input`` (the ``ordinal``-th tensor
    of the flattened inputs) or ``unplanned`` (found no other way: the signature is always
    traced). ``index`` is its record's place."""

    __slots__ = (
        "index",
        "kind",
        "ordinal",
        "reader",
        "position",
        "label",
        "func_name",
        "scope",
        "shape",
        "dtype",
        "copy",
    )

    def __init__(self, index: int, kind: str, ordinal: int, op: Any) -> None:
        self.index = index
        self.kind = kind
        self.ordinal = ordinal
        self.reader: Optional[str] = None
        self.position = -1
        self.label = op.label
        self.func_name = op.func_name
        #: The innermost module call, ``address:call`` (``self`` for the root's own ops).
        self.scope = op.module
        self.shape = op.shape
        self.dtype = op.dtype
        #: Whether the value is copied when taken (an in-place op later in the forward may
        #: overwrite it); otherwise the model's own tensor is kept and its version checked.
        self.copy = False


class CallPlan:
    """The planned ops of one module call, in capture order, how many ops the call runs itself
    (nested calls excluded), and whether it ran ops in nested module calls (without them, a
    planned run needs no frames for nested calls)."""

    __slots__ = ("targets", "total", "nested")

    def __init__(self, targets: List[Target], total: int, nested: bool) -> None:
        self.targets = targets
        self.total = total
        self.nested = nested


class Plan:
    """The plan of one signature. ``calls``: (the module, by weak reference, or None for the
    root; its call number; that call's plan), or None when the signature is always traced.
    ``copied``: labels of values learned to be overwritten in place after they are taken."""

    __slots__ = ("calls", "targets", "inputs", "mismatches", "copied")

    def __init__(self, targets: List[Target], mismatches: int, copied: Set[str]) -> None:
        self.calls: Optional[List[Tuple[Optional[weakref.ref], int, CallPlan]]] = None
        self.targets = targets
        self.inputs = [target for target in targets if target.kind == "input"]
        self.mismatches = mismatches
        self.copied = copied


def plan_from_trace(
    model: Any, ops: List[Any], matched: List[Any], mismatches: int, copied: Set[str]
) -> Plan:
    """The plan for ``matched`` (the selected ops, output nodes excepted, among the trace's
    ``ops``); ``mismatches`` and ``copied`` carry over from the signature's earlier plans.
    Without ``calls`` (always traced) when a selected op ran in a module the model does not
    hold (one built in the forward) or cannot be found again otherwise."""
    ordinals: Dict[int, int] = {}
    totals: Dict[str, int] = {}
    readers: Dict[int, Any] = {}
    waiting: List[Any] = []
    inputs = 0
    enclosing: Set[str] = set()
    for op in ops:
        enclosing.update(op.module_stack[1:])
        if op.kind in OP_KINDS:
            scope = op.module
            ordinals[op.index] = totals.get(scope, 0)
            totals[scope] = ordinals[op.index] + 1
            for leaf in waiting:
                readers[leaf.index] = op
            waiting = []
        elif op.kind in LEAF_KINDS:
            # Declared by the op that first reads it, right before that op.
            waiting.append(op)
            ordinals[op.index] = totals.get(op.module, 0)
        elif op.kind == "input":
            ordinals[op.index] = inputs
            inputs += 1
    overwritten = _overwritten(ops)
    targets = []
    for index, op in enumerate(matched):
        target = Target(index, _kind_of(op), ordinals.get(op.index, -1), op)
        target.copy = op.index in overwritten or op.label in copied
        if target.kind == "leaf":
            source = _read_at(op, readers.get(op.index))
            if source is None:
                target.kind = "unplanned"
            else:
                target.reader, target.position = source
        targets.append(target)
    plan = Plan(targets, mismatches, copied)
    if any(target.kind == "unplanned" for target in targets):
        return plan
    by_scope: Dict[str, List[Target]] = {}
    for target in targets:
        if target.kind in ("op", "leaf"):
            by_scope.setdefault(target.scope, []).append(target)
    calls = []
    for scope, scoped in by_scope.items():
        # ``address:call``; the root's own ops are in ``self``, its only call.
        address, _, number = scope.partition(":")
        module = _module_at(model, address)
        if module is None:
            return plan
        reference = None if module is model else weakref.ref(module)
        plan_of_call = CallPlan(scoped, totals.get(scope, 0), scope in enclosing)
        calls.append((reference, int(number or 1), plan_of_call))
    plan.calls = calls
    return plan


def _kind_of(op: Any) -> str:
    if op.kind in OP_KINDS:
        return "op"
    if op.kind in LEAF_KINDS:
        return "leaf"
    return "input" if op.kind == "input" else "unplanned"


def _read_at(leaf: Any, reader: Any) -> Optional[Tuple[str, int]]:
    """(function, argument position) of the op that first read a constant or buffer; None
    when there is no such op in its call, or it read the value inside a list argument (then
    several of its parents share one position)."""
    if reader is None or reader.module != leaf.module:
        return None
    positions = reader.parent_positions
    position = positions[[parent.index for parent in reader.parents].index(leaf.index)]
    if positions.count(position) > 1:
        return None
    return reader.func_name, position


def _overwritten(ops: List[Any]) -> Set[int]:
    """Ops whose value an in-place op later in the forward may write into: values that share
    storage (an in-place op's output and its target, a view and its base) form groups, and
    every value of a group produced before the group's last in-place write is overwritten."""
    group: Dict[int, int] = {}

    def root(index: int) -> int:
        while group.get(index, index) != index:
            index = group[index]
        return index

    last_write: Dict[int, int] = {}
    for op in ops:
        in_place = op.in_place
        if not (in_place or op.func_name in ALIASING):
            continue
        first = [parent.index for parent, position in zip(op.parents, op.parent_positions) if position == 0]
        if not first:
            continue
        base = root(first[0])
        group[root(op.index)] = base
        if in_place:
            last_write[base] = max(last_write.get(base, -1), op.index)
    # Groups merged after a write was recorded keep it under their new root.
    writes: Dict[int, int] = {}
    for index, written in last_write.items():
        base = root(index)
        writes[base] = max(writes.get(base, -1), written)
    return {op.index for op in ops if op.index < writes.get(root(op.index), -1)}


def _module_at(model: Any, address: str) -> Any:
    if address == "self":
        return model
    if not isinstance(model, torch.nn.Module):
        return None
    try:
        return model.get_submodule(address)
    except AttributeError:
        return None
