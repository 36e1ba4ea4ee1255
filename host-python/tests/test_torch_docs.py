"""The PyTorch docs page's tutorial runs: every ```python block of docs/backends/torch.md, in
order, in one namespace."""

from __future__ import annotations

import pytest
from docs_tutorial import run_tutorial

pytestmark = pytest.mark.torch


def test_the_tutorial_runs():
    namespace, blocks = run_tutorial("torch.md")
    assert blocks == 3
    assert namespace["trace"].backend == "torch"
    assert namespace["finding"].found
