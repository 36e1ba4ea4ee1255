"""Selection by influence (``tl.downstream_of`` / ``tl.upstream_of``) on three real torch
models whose reachability is worked out by hand next to each model: a diamond closed by a
residual edge, a model that branches into two outputs, and a module called twice. Each
expectation is checked with ``trace.select`` and as ``save=`` (the live decision must save
exactly the hand-computed set); rules (``intervene=``) accept a downstream term and refuse an
upstream one with a typed code."""

from __future__ import annotations

from typing import Iterable, List

import pytest
import torch
import torch.nn as nn

import torchlens as tl
from torchlens._core import core
from torchlens.errors import SelectorError

pytestmark = pytest.mark.torch


class Diamond(nn.Module):
    """x → relu → (sigmoid, tanh) → add → add(·, x)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(x)
        b = torch.sigmoid(a)
        c = torch.tanh(a)
        return (b + c) + x


class TwoHeads(nn.Module):
    """x → relu → sigmoid (first output); x · k (a buffer) → exp (second output)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k", torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor):
        first = torch.sigmoid(torch.relu(x))
        second = torch.exp(x * self.k)
        return first, second


class Reuse(nn.Module):
    """x → fc → relu → fc (the same module again) → add(·, sigmoid(x))."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc(x)
        again = self.fc(torch.relu(hidden))
        return again + torch.sigmoid(x)


def labels(ops: Iterable) -> List[str]:
    return sorted(op.label for op in ops)


def traced(model: nn.Module, **kwargs):
    torch.manual_seed(0)
    with torch.no_grad():
        return tl.trace(model, torch.randn(2, 4), **kwargs)


def check(model: nn.Module, selector: tl.Selector, expression: str, expected: List[str]) -> None:
    """``selector`` selects the hand-computed ops; ``save=selector`` saves exactly those of them
    that carry a value of their own (outputs repeat their producer's). ``expression`` is the
    text form the CLI and viewer tests check on the same graphs."""
    trace = traced(model)
    assert labels(trace.select(selector)) == sorted(expected), expression
    saved = traced(model, save=selector)
    kept = {op.label for op in saved.ops if op.saved and op.kind not in ("output", "buffer", "constant")}
    wanted = {label for label in expected if saved[label].kind not in ("output", "buffer", "constant")}
    assert kept == wanted, expression


def test_the_graphs_are_labelled_as_the_hand_computations_assume():
    assert [op.label for op in traced(Diamond()).ops] == [
        "input_1",
        "relu_1_2",
        "sigmoid_1_3",
        "tanh_1_4",
        "add_1_5",
        "add_2_6",
        "output_1",
    ]
    assert [op.label for op in traced(TwoHeads()).ops] == [
        "input_1",
        "relu_1_2",
        "sigmoid_1_3",
        "buffer_1",
        "mul_1_5",
        "exp_1_6",
        "output_1",
        "output_2",
    ]
    assert [op.label for op in traced(Reuse()).ops] == [
        "input_1",
        "linear_1_2:1",
        "relu_1_3",
        "linear_1_2:2",
        "sigmoid_1_4",
        "add_1_5",
        "output_1",
    ]


def test_diamond_with_a_residual_edge():
    model = Diamond()
    # sigmoid reaches the first add, the residual add and the output; not its sibling tanh.
    check(
        model,
        tl.downstream_of(tl.func("sigmoid")),
        "downstream_of(func:sigmoid)",
        ["add_1_5", "add_2_6", "output_1"],
    )
    # relu reaches both branches and everything after them.
    check(
        model,
        tl.downstream_of(tl.func("relu")),
        "downstream_of(func:relu)",
        ["sigmoid_1_3", "tanh_1_4", "add_1_5", "add_2_6", "output_1"],
    )
    # Only the input and relu reach tanh.
    check(model, tl.upstream_of(tl.func("tanh")), "upstream_of(func:tanh)", ["input_1", "relu_1_2"])
    # The residual add is reached by every op before it (a label string names the seed).
    check(
        model,
        tl.upstream_of("add_2_6"),
        "upstream_of(label:add_2_6)",
        ["input_1", "relu_1_2", "sigmoid_1_3", "tanh_1_4", "add_1_5"],
    )
    # On the paths from sigmoid to the output, endpoints excluded: the two adds.
    check(
        model,
        tl.downstream_of(tl.func("sigmoid")) & tl.upstream_of("output_1"),
        "downstream_of(func:sigmoid) & upstream_of(label:output_1)",
        ["add_1_5", "add_2_6"],
    )


def test_branching_into_two_outputs():
    model = TwoHeads()
    # relu feeds only the first head.
    check(model, tl.downstream_of(tl.func("relu")), "downstream_of(func:relu)", ["sigmoid_1_3", "output_1"])
    # exp is reached by the input, the buffer and mul, not by the first head.
    check(
        model,
        tl.upstream_of(tl.func("exp")),
        "upstream_of(func:exp)",
        ["input_1", "buffer_1", "mul_1_5"],
    )
    # Reaching the first output but not the second: relu and sigmoid.
    check(
        model,
        tl.upstream_of("output_1") & ~tl.upstream_of("output_2"),
        "upstream_of(label:output_1) & ~upstream_of(label:output_2)",
        ["relu_1_2", "sigmoid_1_3"],
    )
    # One seed in each head.
    check(
        model,
        tl.downstream_of(tl.func("relu") | tl.func("mul")),
        "downstream_of(func:relu | func:mul)",
        ["sigmoid_1_3", "exp_1_6", "output_1", "output_2"],
    )


def test_a_module_called_twice():
    model = Reuse()
    # The first call reaches relu, the second call, the add and the output.
    check(
        model,
        tl.downstream_of(tl.in_module("fc:1")),
        "downstream_of(in_module:fc:1)",
        ["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"],
    )
    # The second pass is reached by the input, the first pass and relu; not by sigmoid.
    check(
        model,
        tl.upstream_of(tl.label("linear_1_2:2")),
        "upstream_of(label:linear_1_2:2)",
        ["input_1", "linear_1_2:1", "relu_1_3"],
    )
    # Both calls' outputs as seeds: the second is included because the first reaches it.
    check(
        model,
        tl.downstream_of(tl.module("fc")),
        "downstream_of(module:fc)",
        ["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"],
    )
    # sigmoid is reached by the input alone.
    check(model, tl.upstream_of(tl.func("sigmoid")), "upstream_of(func:sigmoid)", ["input_1"])


def test_influence_terms_are_static_selectors():
    selector = tl.downstream_of(tl.func("relu")) & tl.upstream_of("output_1")
    assert core().classify_selector(selector.arena()) == "static"
    assert selector.arena() == (
        [
            ("func", "relu"),
            ("downstream_of", 0),
            ("label", "output_1"),
            ("upstream_of", 2),
            ("and", [1, 3]),
        ],
        4,
    )


def test_a_rule_acts_downstream_and_refuses_upstream():
    model = Diamond()
    # Zeroing every op downstream of tanh: the first add sees a zero, so does the residual add,
    # so the output is zero (the output op repeats its producer).
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    with torch.no_grad():
        edited = tl.trace(model, x, intervene=tl.when(tl.downstream_of(tl.func("tanh")), tl.zero_ablate()))
    assert [label for label in ("sigmoid_1_3", "tanh_1_4") if not edited[label].out.any()] == []
    assert not edited["add_2_6"].out.any()
    with pytest.raises(SelectorError) as refused:
        with torch.no_grad():
            tl.trace(model, x, intervene=tl.when(tl.upstream_of(tl.func("tanh")), tl.zero_ablate()))
    assert refused.value.code == "selector_upstream_in_rule"


def test_a_predicate_seed_is_selected_on_a_finished_trace():
    trace = traced(Diamond())
    chosen = trace.select(tl.downstream_of(tl.where(lambda op: op.func_name == "tanh")))
    assert labels(chosen) == ["add_1_5", "add_2_6", "output_1"]
