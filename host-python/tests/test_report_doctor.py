"""``tl.report.doctor()``: one row per registered backend from the shipped scorecards, in the
spec's format, with no framework imported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import torchlens as tl
from torchlens.report import backend_scorecards as doctor_module

FRAMEWORKS = ("torch", "jax", "tensorflow", "mlx", "paddle", "tinygrad", "keras", "flax", "equinox")
DETAILS = re.compile(
    r"^(stable|preview|planned); (\d+)/(\d+) cells passed, (\d+) unsupported, (\d+) failed; "
    r"pinned (\S+), installed (\S+), supported \[(\S+), (\S+)\)$"
)
PYTHONPATH = os.pathsep.join(sys.path)


def _python(*args: str) -> list:
    """The stdout lines of a fresh Python process (this process's import path)."""
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    return done.stdout.strip().splitlines()


def test_doctor_imports_no_framework():
    script = (
        "import sys, torchlens as tl\n"
        "report = tl.report.doctor()\n"
        "str(report); report._repr_html_()\n"
        f"print([name for name in {FRAMEWORKS!r} if name in sys.modules])\n"
    )
    assert _python("-c", script)[-1] == "[]"


def test_one_row_per_backend_in_the_spec_format():
    report = tl.report.doctor()
    assert [row.key for row in report.rows] == [f"backend_scorecard:{name}" for name in tl.backends.names()]
    for row in report.rows:
        spec = tl.backends.get_spec(row.key.split(":", 1)[1])
        assert row.status in ("pass", "known_broken", "scope", "not_tested")
        if row.status == "not_tested":
            continue
        match = DETAILS.match(row.details)
        assert match, row.details
        maturity, passed, denominator, unsupported, failed, pinned, _installed, minimum, ceiling = (
            match.groups()
        )
        assert (maturity, pinned, minimum, ceiling) == (
            spec.maturity,
            spec.requirement.pinned,
            spec.requirement.minimum,
            spec.requirement.ceiling,
        )
        assert int(passed) + int(unsupported) + int(failed) <= int(denominator)
        assert (row.status == "known_broken") == (int(failed) > 0)
        if row.status == "known_broken":
            assert row.suggestion.startswith("first failed cell: ")


def test_the_shipped_record_is_what_the_row_counts():
    row = tl.report.doctor().row("backend_scorecard:jax")
    path = os.path.join(os.path.dirname(tl.__file__), "backends", "jax", "scorecard.json")
    with open(path, encoding="utf-8") as handle:
        scorecard = json.load(handle)
    version = tl.backends.scorecard.installed_version("jax")
    cells = scorecard["records"].get(version, scorecard["records"][scorecard["framework"]["pinned"]])["cells"]
    passed = sum(cell["status"] == "passed" for cell in cells.values())
    assert f"; {passed}/{len(cells)} cells passed," in row.details


def test_an_absent_framework_is_scope_and_names_the_install_extra(monkeypatch):
    real = doctor_module.installed_version
    monkeypatch.setattr(
        doctor_module, "installed_version", lambda module: None if module == "jax" else real(module)
    )
    row = tl.report.doctor().row("backend_scorecard:jax")
    assert row.status == "scope"
    assert "installed absent" in row.details
    assert row.suggestion == "pip install 'torchlens[jax]'"


def test_a_backend_with_no_scorecard_is_not_tested():
    # The NumPy test adapter (registered through the entry point) ships no scorecard.
    row = tl.report.doctor().row("backend_scorecard:numpy")
    assert row.status == "not_tested"


def test_the_terminal_table_and_the_command():
    report = tl.report.doctor()
    text = str(report)
    assert text.splitlines()[0].split() == ["key", "status", "details", "suggestion"]
    assert all(row.key in text for row in report.rows)
    assert "<table>" in report._repr_html_()
    out = "\n".join(_python("-m", "torchlens", "doctor"))
    assert "backend_scorecard:torch" in out and "backend_scorecard:jax" in out


def test_the_capability_summary_is_exposed_per_backend_without_a_framework_import():
    script = (
        "import sys, torchlens as tl\n"
        "summary = tl.backends.jax.capability_summary\n"
        "print(summary['draw'], summary['intervene'], len(summary))\n"
        f"print([name for name in {FRAMEWORKS!r} if name in sys.modules])\n"
    )
    out = _python("-c", script)
    assert out[-2] == f"supported unsupported {len(tl.backends.capability_names())}"
    assert out[-1] == "[]"
    assert dict(tl.backends.torch.capability_summary)["source_lines"] == "supported"
