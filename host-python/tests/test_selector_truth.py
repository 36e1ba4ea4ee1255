"""Selectors are combined with ``&``, ``|`` and ``~``: Python's ``and``, ``or`` and ``not`` would
silently pick one of them (``tl.func("relu") and tl.func("linear")`` is the second), so a
selector refuses to be a truth value, as NumPy arrays do."""

from __future__ import annotations

import pytest

import torchlens as tl
from torchlens.errors import SelectorError


@pytest.mark.parametrize(
    "mistake",
    [
        lambda: tl.func("relu") and tl.func("linear"),
        lambda: tl.func("relu") or tl.func("linear"),
        lambda: not tl.in_module("encoder"),
        lambda: bool(tl.func("relu") & tl.func("linear")),
        lambda: "yes" if tl.label("relu_1_1") else "no",
    ],
)
def test_a_selector_refuses_truth_testing_naming_the_operators(mistake):
    with pytest.raises(SelectorError) as caught:
        mistake()
    assert caught.value.code == "selector_truth_value"
    assert "&" in caught.value.remedy and "|" in caught.value.remedy and "~" in caught.value.remedy


def test_the_operators_still_combine_selectors():
    combined = (tl.func("relu") | tl.func("gelu")) & ~tl.in_module("encoder")
    nodes, root = combined.arena()
    assert nodes[root] == ("and", [2, 4]) and len(nodes) == 6
