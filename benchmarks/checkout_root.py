"""Puts the checkout's root on ``sys.path`` so the benchmark scripts, run as
``python benchmarks/<name>.py`` (also by a reference interpreter in a child process), can import
the models they time from the conformance suite (``conformance/models/``), which does not ship.
Appended, not prepended: nothing at the root may shadow an installed package."""

from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if ROOT not in sys.path:
    sys.path.append(ROOT)
