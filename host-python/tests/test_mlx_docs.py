"""The MLX docs page's tutorial runs: every ```python block of docs/backends/mlx.md, in order,
in one namespace."""

from __future__ import annotations

import pytest

pytest.importorskip("mlx.core")

from docs_tutorial import run_tutorial  # noqa: E402

pytestmark = pytest.mark.mlx


def test_the_tutorial_runs():
    namespace, blocks = run_tutorial("mlx.md")
    assert blocks >= 6
    assert namespace["trace"].backend == "mlx"
    assert "inputs.0" in namespace["trace"].autograd.derived_grads
