"""The TensorFlow docs page's tutorial runs: every ```python block of docs/backends/tensorflow.md,
in order, in one namespace. TensorFlow is imported by the blocks when the test runs, never at
collection (see test_tf_capture.py)."""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "backends", "tensorflow.md")


def test_the_tutorial_runs():
    with open(PAGE, encoding="utf-8") as handle:
        blocks = re.findall(r"```python\n(.*?)```", handle.read(), re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, PAGE, "exec"), namespace)
    assert namespace["trace"].backend == "tf"
    assert namespace["ablated"].backend == "tf"
