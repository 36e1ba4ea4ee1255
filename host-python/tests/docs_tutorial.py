"""Running a docs page's (or the README's) code: every ```python block of ``docs/backends/<page>``, in
order, in one namespace (what a reader pasting them one after another gets)."""

from __future__ import annotations

import os
import re
from typing import Tuple

PAGES = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "backends")


def run_tutorial(page: str) -> Tuple[dict, int]:
    """The namespace after running the page's blocks, and how many blocks ran."""
    return run_markdown(os.path.join(PAGES, page))


def run_markdown(path: str) -> Tuple[dict, int]:
    """The namespace after running every ```python block of a markdown file, and how many ran."""
    with open(path, encoding="utf-8") as handle:
        blocks = re.findall(r"```python\n(.*?)```", handle.read(), re.S)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, path, "exec"), namespace)
    return namespace, len(blocks)
