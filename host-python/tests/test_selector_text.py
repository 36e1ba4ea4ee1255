"""Selectors written as text — the language of the ``tlspec`` CLI and the viewer's search box —
are parsed by the core in Python too: ``trace.select``, ``save=``, ``intervene=`` and
``stop_after=`` take ``"func:relu & in_module:encoder"``. A malformed expression is the CLI's
``selector_expression_syntax`` error with its position; a string without the language's syntax
stays one label, exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchlens as tl
from torchlens.errors import ArgumentError, SelectorError

pytestmark = pytest.mark.torch


class _Encoded(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        return self.head(self.encoder(x))


@pytest.fixture(scope="module")
def traced():
    torch.manual_seed(0)
    model = _Encoded()
    x = torch.randn(2, 3)
    return model, x, tl.trace(model, x)


def _labels(ops):
    return [op.label for op in ops]


@pytest.mark.parametrize(
    ("text", "built"),
    [
        ("func:relu & in_module:encoder", tl.func("relu") & tl.in_module("encoder")),
        ("func:relu & ~in_module:encoder", tl.func("relu") & ~tl.in_module("encoder")),
        (
            "(func:linear | func:relu) & in_module:head",
            (tl.func("linear") | tl.func("relu")) & tl.in_module("head"),
        ),
        ("followed_by(func:linear, func:relu)", tl.followed_by(tl.func("linear"), tl.func("relu"))),
        (
            "downstream_of(in_module:encoder) & func:linear",
            tl.downstream_of(tl.in_module("encoder")) & tl.func("linear"),
        ),
        ("label_contains:relu", tl.label_contains("relu")),
    ],
)
def test_text_selects_the_same_ops_as_the_python_selector(traced, text, built):
    _model, _x, trace = traced
    chosen = _labels(trace.select(text))
    assert chosen and chosen == _labels(trace.select(built))


def test_a_plain_label_string_is_that_label_exactly(traced):
    _model, _x, trace = traced
    first_linear = trace.select("func:linear")[0].label
    assert _labels(trace.select(first_linear)) == [first_linear]
    # The CLI's bare word means label_contains; tl.parse_selector speaks the CLI's grammar whole.
    assert _labels(trace.select(tl.parse_selector("relu"))) == _labels(
        trace.select(tl.label_contains("relu"))
    )


def test_text_mixes_with_python_selectors(traced):
    _model, _x, trace = traced
    assert _labels(trace.select(tl.func("relu") & "in_module:head")) == _labels(
        trace.select(tl.func("relu") & tl.in_module("head"))
    )
    assert _labels(trace.select("in_module:head" & tl.func("relu"))) == _labels(
        trace.select(tl.in_module("head") & tl.func("relu"))
    )


@pytest.mark.parametrize(
    ("text", "position"),
    [("func:relu &", 11), ("colour:red", 0), ("(func:relu", 10), ("followed_by(func:relu)", 21)],
)
def test_a_malformed_expression_is_the_clis_syntax_error_with_its_position(traced, text, position):
    _model, _x, trace = traced
    with pytest.raises(SelectorError) as caught:
        trace.select(text)
    assert caught.value.code == "selector_expression_syntax"
    assert f"at byte {position}" in str(caught.value)


def test_save_intervene_and_stop_after_take_text(traced):
    model, x, trace = traced
    saved = tl.trace(model, x, save="func:relu & in_module:encoder")
    assert [op.label for op in saved.saved_ops if op.kind == "compute"] == _labels(
        trace.select(tl.func("relu") & tl.in_module("encoder"))
    )
    edited = tl.trace(model, x, intervene=tl.when("func:relu & in_module:head", tl.zero_ablate()))
    assert torch.count_nonzero(edited.outputs[0].out) == 0
    stopped = tl.trace(model, x, stop_after="func:relu & in_module:encoder")
    assert len(stopped.ops) < len(trace.ops)


def test_something_that_is_no_selector_is_a_typed_argument_error(traced):
    _model, _x, trace = traced
    for wrong in (3, None, ["func:relu"], b"func:relu"):
        with pytest.raises(ArgumentError) as caught:
            trace.select(wrong)
        assert caught.value.code == "argument_invalid"
        assert isinstance(caught.value, TypeError)
