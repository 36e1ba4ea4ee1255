"""Puts the checkout's root on ``sys.path`` so tests can import the conformance suite
(``conformance/``) and the repository checks (``scripts/checks/``), which do not ship."""

from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
