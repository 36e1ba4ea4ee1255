"""True backward capture on torch (``save_grads=``, ``backward_ready=True``, gradient-site edits).

During the forward every recorded output that requires grad gets a tensor hook, registered as
the op returns: that is the only moment the tensor's autograd node is the op's own (a later
in-place op moves the tensor to a new node). Labels are final only after the capture, so the
hooks decide by op index, filled in once the trace is finished: a hook of an op that was not
selected does nothing. When the user's own ``loss.backward()`` reaches a selected op, its output
gradient is saved (per backward pass, told apart by autograd's graph-task id) and the
gradient-site edits on it (``tl.when(tl.grad(selector), action)``) replace the gradient that flows
on. The backward graph (autograd functions reachable from the model's outputs, linked to the
forward ops whose outputs they differentiate) is read once the forward ends.

The hooks hold a :class:`_HookState` and the :class:`~torchlens.backward.BackwardRecord` it
writes, never the trace: the autograd graph is not visible to Python's cycle collector, so a
hook holding the trace (which holds the output, which holds the graph) would never be freed."""

from __future__ import annotations

import re
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from torchlens.backward import BackwardGraph, BackwardRecord, GradFn
from torchlens.errors import SelectorMatchedNothingWarning
from torchlens.trace import warn_matched_nothing

from .capture import flatten

_BACKWARD_SUFFIX = re.compile(r"backward\d*$")


def grad_fn_type(class_name: str) -> str:
    """The normalized type of an autograd function (``AddmmBackward0`` → ``addmm``), as the
    reference labels grad_fns."""
    lowered = class_name.lower()
    stripped = _BACKWARD_SUFFIX.sub("", lowered) or lowered
    return stripped.replace("_", "")


def _task_id() -> int:
    """The id of the running backward call (autograd's graph task), or -1 where torch has none."""
    current = getattr(torch._C, "_current_graph_task_id", None)
    return current() if current is not None else -1


class _HookState:
    """What the tensor hooks read and write: op indices by value id (filled at finish), the
    edit rules by op, and the record the gradients go to."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.record = BackwardRecord()
        #: Value id → op indices carrying that value (an output op shares its producer's).
        self.ops_of: Dict[int, List[int]] = {}
        self.saved: set = set()
        #: Op index → [(rule description, action)] of the gradient-site edits on it.
        self.rules: Dict[int, List[Tuple[str, Any]]] = {}
        self.task: Optional[int] = None
        #: Value ids of the model's outputs (a backward that reaches one is a backward pass).
        self.roots: set = set()

    def on_grad(self, value_id: int, grad: torch.Tensor) -> Optional[torch.Tensor]:
        ops = self.ops_of.get(value_id)
        if not ops:
            return None
        record = self.record
        task = _task_id()
        if task != self.task or task == -1 and value_id in self.roots:
            self.task = task
            record.passes += 1
        edited = None
        for op in ops:
            for rule, action in self.rules.get(op, ()):
                with torch.no_grad():
                    edited = self.adapter.apply_action(action, grad if edited is None else edited)
                record.edits.setdefault(op, []).append((rule, action.describe(), "backward"))
        flowing = grad if edited is None else edited
        for op in ops:
            if op in self.saved:
                record.grads.setdefault(op, []).append((record.passes, flowing.detach().clone()))
        return edited


class BackwardArming:
    """Backward capture for one ``tl.trace`` call: :meth:`watch` each recorded output as it
    returns, then :meth:`finish` with the trace once the forward is over."""

    def __init__(self, save_grads: Any, rules: Sequence[Any], adapter: Any) -> None:
        #: ``True`` (every op), a selector, or None/False (save no gradients).
        self.save_grads = save_grads
        self.rules = list(rules)
        self.state = _HookState(adapter)
        self.state.record.save_grads = save_grads is not None and save_grads is not False
        #: Autograd node → the value id whose tensor it produced (only during the capture).
        self._nodes: Dict[Any, int] = {}

    @staticmethod
    def wanted(save_grads: Any, backward_ready: bool, rules: Sequence[Any]) -> bool:
        return save_grads not in (None, False) or backward_ready or bool(rules)

    def watch(self, value_id: int, tensor: torch.Tensor) -> None:
        """Arms one recorded output (called with the recording mode quiet)."""
        if not tensor.requires_grad:
            return
        node = tensor.grad_fn
        if node is not None:
            self._nodes.setdefault(node, value_id)
        state = self.state
        tensor.register_hook(lambda grad, value_id=value_id: state.on_grad(value_id, grad))

    def finish(self, trace: Any, output: Any, params: Dict[str, torch.Tensor]) -> None:
        """Decides which ops are armed (labels are final now), reads the backward graph and hands
        the trace its record and its live output."""
        state = self.state
        by_value: Dict[int, List[int]] = {}
        for op in trace.ops:
            if op.kind == "output" and op.parents:
                # An output node carries its producer's value, so it has the same gradient.
                value_id = op.parents[0]._info.get("value")
            elif op.kind in ("compute", "input"):
                value_id = op._info.get("value")
            else:
                continue
            if value_id is not None:
                by_value.setdefault(value_id, []).append(op.index)
        if self.save_grads is True:
            saved = {op for ops in by_value.values() for op in ops}
        elif self.save_grads is not None and self.save_grads is not False:
            saved = {op.index for op in trace.select(self.save_grads)}
        else:
            saved = set()
        for rule in self.rules:
            matched = trace.select(rule.condition) if _quiet_select(trace, rule.condition) else []
            if not matched:
                warn_matched_nothing(rule.condition, stacklevel=5)
            for op in matched:
                state.rules.setdefault(op.index, []).append((rule.describe(), rule.action))
        state.saved = saved
        state.roots = {op.parents[0]._info.get("value") for op in trace.outputs if op.parents}
        armed = saved | set(state.rules) | {op.index for op in trace.outputs}
        state.ops_of = {
            value_id: [op for op in ops if op in armed]
            for value_id, ops in by_value.items()
            if any(op in armed for op in ops)
        }
        record = state.record
        record.saved_ops = tuple(sorted(op for op in saved))
        record.graph = self._graph(trace, output, params)
        record.param_grad = _param_reader(params)
        self._nodes = {}
        trace.backward = record
        trace.output = output

    def _graph(self, trace: Any, output: Any, params: Dict[str, torch.Tensor]) -> BackwardGraph:
        """Autograd functions reachable from the outputs, in topological order (roots first)."""
        labels_of_value: Dict[int, str] = {}
        for op in trace.ops:
            value_id = op._info.get("value")
            if value_id is not None and op.kind in ("compute", "input"):
                labels_of_value.setdefault(value_id, op.label)
        param_names = {id(tensor): address for address, tensor in params.items()}
        roots = []
        for _, tensor in flatten(output, ""):
            node = tensor.grad_fn
            if node is not None and node not in roots:
                roots.append(node)
        # Kahn's order over the reachable subgraph: count the edges into each node first.
        incoming: Dict[Any, int] = {}
        order: List[Any] = []
        stack = list(reversed(roots))
        seen = set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for child, _ in node.next_functions:
                if child is not None:
                    incoming[child] = incoming.get(child, 0) + 1
                    stack.append(child)
        ready = [node for node in roots if incoming.get(node, 0) == 0]
        while ready:
            node = ready.pop(0)
            order.append(node)
            for child, _ in node.next_functions:
                if child is None:
                    continue
                incoming[child] -= 1
                if incoming[child] == 0:
                    ready.append(child)
        index = {node: position for position, node in enumerate(order)}
        type_counts: Dict[str, int] = {}
        nodes = []
        for position, node in enumerate(order):
            class_name = type(node).__name__
            kind = grad_fn_type(class_name)
            type_counts[kind] = type_counts.get(kind, 0) + 1
            value_id = self._nodes.get(node)
            variable = getattr(node, "variable", None) if class_name == "AccumulateGrad" else None
            children = []
            for child, _ in node.next_functions:
                if child is not None and index[child] not in children:
                    children.append(index[child])
            nodes.append(
                GradFn(
                    index=position,
                    label=f"{kind}_back_{type_counts[kind]}_{position + 1}",
                    class_name=class_name,
                    op_label=labels_of_value.get(value_id) if value_id is not None else None,
                    param=param_names.get(id(variable)) if variable is not None else None,
                    children=tuple(children),
                )
            )
        return BackwardGraph(nodes)


def _quiet_select(trace: Any, selector: Any) -> bool:
    """Whether ``selector`` matches anything (without the matched-nothing warning, which the
    caller raises at the user's line)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectorMatchedNothingWarning)
        return bool(trace.select(selector))


def _param_reader(params: Dict[str, torch.Tensor]) -> Any:
    """Reads a parameter's live ``.grad`` by address (the model's own tensor, as autograd left it)."""

    def read(address: str) -> Any:
        tensor = params.get(address)
        return None if tensor is None else tensor.grad

    return read


__all__ = ["BackwardArming", "grad_fn_type"]
