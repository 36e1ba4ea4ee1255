"""A captured backward pass, framework-neutral: the backward graph (one node per autograd
function, linked to the forward op whose output it differentiates) and the gradients each
selected op received, per backward pass. A backend with true backward capture (torch) fills a
:class:`BackwardRecord` while the user's own ``loss.backward()`` runs; ``tl.load`` rebuilds one
from a ``.tlspec`` that holds a backward pass. It holds plain data and framework arrays only, never
the trace or the autograd graph, so hooks that write into it cannot keep a trace alive."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

#: A saved gradient's tensor name in a ``.tlspec`` is this prefix and the op label
#: (``grad/linear_1_2``; docs/tlspec-format.md, "Backward pass").
GRAD_TENSOR_PREFIX = "grad/"
#: Payload slots of gradients (the core's handle on each): above every value id an adapter
#: hands out, so they never meet an op payload's slot.
GRAD_SLOT_BASE = 1 << 48


@dataclass(frozen=True)
class GradFn:
    """One node of the backward graph: an autograd function (``class_name``, e.g.
    ``AddmmBackward0``), labelled ``{type}_back_{typeIndex}_{step}`` as the reference names it
    (``addmm_back_1_3``). ``op_label`` is the forward op whose output it differentiates (None
    for functions no recorded op produced, such as ``AccumulateGrad`` or a transpose inside a
    linear layer); ``param`` the parameter an ``AccumulateGrad`` node writes into. ``children``
    are the indices of the functions it passes gradients to (toward the inputs)."""

    index: int
    label: str
    class_name: str
    op_label: Optional[str] = None
    param: Optional[str] = None
    children: Tuple[int, ...] = ()

    @property
    def has_op(self) -> bool:
        return self.op_label is not None

    def as_dict(self) -> Dict[str, Any]:
        return {
            "label": self.label,
            "class_name": self.class_name,
            "op": self.op_label,
            "param": self.param,
            "children": list(self.children),
        }


class BackwardGraph:
    """The backward graph: nodes in topological order from the model's outputs (roots first)."""

    def __init__(self, nodes: Sequence[GradFn] = ()) -> None:
        self.nodes: List[GradFn] = list(nodes)

    @property
    def edges(self) -> List[Tuple[str, str]]:
        """``(from, to)`` label pairs in gradient-flow order (a node, then a function it feeds)."""
        return [(node.label, self.nodes[child].label) for node in self.nodes for child in node.children]

    @property
    def roots(self) -> List[GradFn]:
        fed = {child for node in self.nodes for child in node.children}
        return [node for node in self.nodes if node.index not in fed]

    def __getitem__(self, label: str) -> GradFn:
        for node in self.nodes:
            if node.label == label:
                return node
        raise KeyError(label)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Any:
        return iter(self.nodes)

    def __repr__(self) -> str:
        return f"<BackwardGraph {len(self.nodes)} grad_fns, {len(self.edges)} edges>"


@dataclass
class BackwardRecord:
    """What a trace knows about its backward passes.

    ``grads`` maps an op index to ``[(pass number, gradient), ...]`` for the ops whose gradients
    were saved; ``saved_ops`` are the op indices armed for saving (``save_grads=``); ``passes``
    counts the backward passes that reached the trace's outputs; ``edits`` maps an op index to
    the gradient-site edits that fired on it (``(rule, action, "backward")``, the shape of a
    forward edit record). ``param_grad`` reads a parameter's gradient (the live ``param.grad`` on
    a captured trace, the saved one on a loaded trace)."""

    graph: BackwardGraph = field(default_factory=BackwardGraph)
    grads: Dict[int, List[Tuple[int, Any]]] = field(default_factory=dict)
    saved_ops: Tuple[int, ...] = ()
    passes: int = 0
    edits: Dict[int, List[Tuple[str, str, str]]] = field(default_factory=dict)
    param_grad: Optional[Callable[[str], Any]] = None
    #: Whether gradients are saved (``save_grads=``) or only the graph is kept
    #: (``backward_ready=True``).
    save_grads: bool = False

    def grad_of(self, op: int) -> Any:
        """The op's gradient from the latest backward pass that reached it, or None."""
        entries = self.grads.get(op)
        return entries[-1][1] if entries else None

    def grads_of(self, op: int) -> List[Any]:
        return [grad for _, grad in self.grads.get(op, ())]


def to_core_json(record: BackwardRecord, labels: Dict[str, int]) -> str:
    """The record as the core's backward graph JSON (op labels become op ids; each op with a
    gradient gets the slot ``GRAD_SLOT_BASE + op``)."""
    nodes = [
        {
            "label": node.label,
            "class_name": node.class_name,
            "op": labels.get(node.op_label) if node.op_label is not None else None,
            "param": node.param,
            "children": list(node.children),
        }
        for node in record.graph.nodes
    ]
    grads = [{"op": op, "slot": GRAD_SLOT_BASE + op} for op in sorted(record.grads) if record.grads[op]]
    return json.dumps({"passes": record.passes, "nodes": nodes, "grads": grads})


def from_core_json(text: str, labels: List[str], grads: Dict[int, Any]) -> BackwardRecord:
    """A record rebuilt from the core's JSON (a loaded trace): ``labels`` are the op labels by
    op id, ``grads`` the loaded gradient of each op by op id (the latest pass's)."""
    data = json.loads(text)
    nodes = [
        GradFn(
            index=index,
            label=node["label"],
            class_name=node["class_name"],
            op_label=labels[node["op"]] if node.get("op") is not None else None,
            param=node.get("param"),
            children=tuple(node.get("children", ())),
        )
        for index, node in enumerate(data.get("nodes", ()))
    ]
    passes = int(data.get("passes", 0))
    return BackwardRecord(
        graph=BackwardGraph(nodes),
        grads={op: [(passes, value)] for op, value in grads.items()},
        saved_ops=tuple(sorted(grads)),
        passes=passes,
        save_grads=bool(grads),
    )
