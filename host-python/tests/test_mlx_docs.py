"""The MLX docs page's tutorial runs: every ```python block of docs/backends/mlx.md, in order,
in one namespace."""

from __future__ import annotations

import os
import re

import pytest

pytest.importorskip("mlx.core")

pytestmark = pytest.mark.mlx

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "backends", "mlx.md")


def test_the_tutorial_runs():
    with open(PAGE, encoding="utf-8") as handle:
        blocks = re.findall(r"```python\n(.*?)```", handle.read(), re.S)
    assert len(blocks) >= 6
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, PAGE, "exec"), namespace)
    assert namespace["trace"].backend == "mlx"
    assert "inputs.0" in namespace["trace"].autograd.derived_grads
