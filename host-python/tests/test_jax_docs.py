"""The JAX docs page's tutorial runs: every ```python block of docs/backends/jax.md, in order,
in one namespace."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from docs_tutorial import run_tutorial  # noqa: E402

pytestmark = pytest.mark.jax


def test_the_tutorial_runs():
    namespace, blocks = run_tutorial("jax.md")
    assert blocks == 3
    assert namespace["modular"].backend == "jax"
    assert "params.w" in namespace["trace"].autograd.derived_grads
