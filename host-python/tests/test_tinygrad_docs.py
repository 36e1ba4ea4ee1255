"""The tinygrad docs page's tutorial runs: every ```python block of docs/backends/tinygrad.md,
in order, in one namespace."""

from __future__ import annotations

import pytest

pytest.importorskip("tinygrad")

from docs_tutorial import run_tutorial  # noqa: E402

pytestmark = pytest.mark.tinygrad


def test_the_tutorial_runs():
    namespace, blocks = run_tutorial("tinygrad.md")
    assert blocks >= 4
    assert namespace["trace"].backend == "tinygrad"
