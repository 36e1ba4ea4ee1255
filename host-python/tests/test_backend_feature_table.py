"""The conformance suite against the shipped scorecards, for every built backend whose framework
is installed (skipped, and reported, where it is not): ``--check`` passes, and every Yes and
Partial cell of the feature table in docs/backends.md passes again when rerun. One suite run
per backend serves both (the runner keeps it for the process)."""

from __future__ import annotations

import conformance_paths  # noqa: F401
import pytest
from backend_cases import backend_params, require_installed

from conformance.runner import run_suite
from conformance.scorecard import load, main
from torchlens.backends.scorecard import FEATURE_ROWS, feature_cell, record_for, task_cells

# The conformance table runs every backend through every task on whichever host runs the core:
# make test runs it under each.
pytestmark = pytest.mark.both_hosts


@pytest.mark.parametrize("name", backend_params(built_in_only=True))
def test_the_scorecard_check_passes(name, capsys):
    require_installed(name)
    status = main(["--backend", name, "--check"])
    assert status == 0, capsys.readouterr().out


@pytest.mark.parametrize("name", backend_params(built_in_only=True))
def test_the_yes_and_partial_cells_pass_when_rerun(name):
    require_installed(name)
    _, record = record_for(load(name))
    run = run_suite(name)["cells"]
    rerun = 0
    for _title, tasks in FEATURE_ROWS:
        word, _ = feature_cell(record, tasks)
        if word not in ("Yes", "Partial"):
            continue
        for case, cell in record["cells"].items():
            if case.split("/", 1)[1] in tasks and cell["status"] == "passed":
                assert run[case]["status"] == "passed", (case, run[case])
                rerun += 1
    assert rerun > 0
    assert all(task_cells(record, task) for _title, tasks in FEATURE_ROWS for task in tasks)
