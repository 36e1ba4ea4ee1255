"""The Paddle docs page's tutorial runs: every ```python block of docs/backends/paddle.md, in
order, in one namespace."""

from __future__ import annotations

import os
import re

import pytest

pytest.importorskip("paddle")

pytestmark = pytest.mark.paddle

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "backends", "paddle.md")


def test_the_tutorial_runs():
    with open(PAGE, encoding="utf-8") as handle:
        blocks = re.findall(r"```python\n(.*?)```", handle.read(), re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, PAGE, "exec"), namespace)
    assert namespace["trace"].backend == "paddle"
    assert namespace["partial"].is_stopped
