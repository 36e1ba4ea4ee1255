"""The README's example and the editing page (docs/editing.md: an ablation, an early stop, a
value-dependent save and activation patching) run as written."""

from __future__ import annotations

import os

import pytest
from docs_tutorial import run_markdown

pytestmark = pytest.mark.torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_the_editing_page_runs():
    namespace, blocks = run_markdown(os.path.join(ROOT, "docs", "editing.md"))
    assert blocks >= 6
    assert namespace["stopped"].is_stopped


def test_the_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the README saves and draws into the working directory
    namespace, blocks = run_markdown(os.path.join(ROOT, "README.md"))
    assert blocks >= 3
    assert any(op.is_edited for op in namespace["patched"].ops)
