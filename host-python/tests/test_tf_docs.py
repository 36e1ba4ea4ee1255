"""The TensorFlow docs page's tutorial runs: every ```python block of docs/backends/tensorflow.md,
in order, in one namespace. TensorFlow is imported by the blocks when the test runs, never at
collection (see test_tf_capture.py)."""

from __future__ import annotations

import importlib.util

import pytest
from docs_tutorial import run_tutorial

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]


def test_the_tutorial_runs():
    namespace, blocks = run_tutorial("tensorflow.md")
    assert blocks >= 4
    assert namespace["trace"].backend == "tf"
    assert namespace["ablated"].backend == "tf"
