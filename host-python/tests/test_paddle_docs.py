"""The Paddle docs page's tutorial runs: every ```python block of docs/backends/paddle.md, in
order, in one namespace."""

from __future__ import annotations

import pytest

pytest.importorskip("paddle")

from docs_tutorial import run_tutorial  # noqa: E402

pytestmark = pytest.mark.paddle


def test_the_tutorial_runs():
    namespace, blocks = run_tutorial("paddle.md")
    assert blocks >= 4
    assert namespace["trace"].backend == "paddle"
    assert namespace["partial"].is_stopped
