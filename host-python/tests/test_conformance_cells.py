"""How the conformance suite turns a task's run into a cell, and what --graduation prints: the
states come from running (real errors, real refusals), never from a capability flag."""

from __future__ import annotations

import conformance_paths  # noqa: F401
import pytest

import torchlens as tl
from conformance import graduation as graduation_module
from conformance.models import models_of
from conformance.runner import run_cell
from conformance.scorecard import main
from conformance.tasks import TASKS, Case, Task
from torchlens.backends.scorecard import CAPABILITY_TASKS, FEATURE_ROWS
from torchlens.errors import BackendUnsupportedError, SelectorMatchedNothingWarning

pytestmark = pytest.mark.torch


@pytest.fixture
def case():
    models = models_of("torch")
    return Case("torch", models, models.models[0], tl.backends.get_backend("torch"))


def test_every_task_the_tables_name_exists():
    named = set(CAPABILITY_TASKS.values()) | {task for _, tasks in FEATURE_ROWS for task in tasks}
    assert named <= set(TASKS)
    assert set(CAPABILITY_TASKS) == set(tl.backends.capability_names())


def test_a_cell_is_what_running_the_task_gave(case):
    def refuses(code):
        def run(case):
            raise BackendUnsupportedError("refused", code)

        return run

    assert run_cell(case, TASKS["capture"]) == {"status": "passed"}
    refused = Task("refused", refuses("streaming_unsupported"))
    assert run_cell(case, refused) == {"status": "unsupported", "code": "streaming_unsupported"}
    with pytest.warns(SelectorMatchedNothingWarning):
        failed = run_cell(
            case, Task("wrong", lambda case: tl.trace(*case.build()).select(tl.func("nothing"))[0])
        )
    assert failed["status"] == "failed" and failed["error"].startswith("IndexError")
    unregistered = run_cell(case, Task("odd", refuses("not_a_registered_code")))
    assert unregistered["status"] == "failed" and "unregistered" in unregistered["error"]
    missing = run_cell(case, Task("future", lambda case: None, requires=("no_such_api",)))
    assert missing == {"status": "not_run", "reason": "tl.no_such_api is not in this build"}
    assert run_cell(None, TASKS["capture"])["status"] == "not_run"


def _graduation_lines(capsys):
    out = capsys.readouterr().out.splitlines()
    items = [line.strip() for line in out if line.strip()[:2] in {f"{n}." for n in range(1, 7)}]
    assert len(items) == 6
    assert all(("[pass]" in item or "[FAIL]" in item) and ": " in item.split("] ", 1)[1] for item in items)
    return items, out[-1]


def test_graduation_prints_six_items_with_their_reasons(capsys, monkeypatch):
    # torch passes all six since its minimum (2.10) has a passing record (2.10.0); graduation
    # still never changes maturity: that takes a recorded decision.
    assert main(["--backend", "torch", "--graduation"]) == 0
    items, last = _graduation_lines(capsys)
    assert all("[pass]" in item for item in items)
    assert "passing on 2.10.0" in items[4]
    assert last == "torch: graduation passed"
    # Without a record on the minimum, item 5 fails with its reason and graduation does not pass.
    real = graduation_module.load("torch")
    without_minimum = {
        **real,
        "records": {
            version: record for version, record in real["records"].items() if not version.startswith("2.10")
        },
    }
    monkeypatch.setattr(graduation_module, "load", lambda backend: without_minimum)
    monkeypatch.setattr(graduation_module, "shipped_scorecard", lambda backend: without_minimum)
    assert main(["--backend", "torch", "--graduation"]) == 1
    items, last = _graduation_lines(capsys)
    assert "[FAIL]" in items[4] and "no record on the supported minimum 2.10" in items[4]
    assert last == "torch: graduation not passed"
    assert tl.backends.get_spec("torch").maturity == "preview"


def test_an_adapter_that_does_not_load_fails_every_cell_with_the_reason():
    from conformance.runner import run_suite
    from torchlens.backends import BackendSpec, FrameworkRequirement

    spec = BackendSpec(
        name="unloadable",
        aliases=(),
        maturity="preview",
        requirement=FrameworkRequirement("numpy", "1.0", "3.0", "2.4.6", "numpy"),
        adapter="torchlens_no_such_adapter:Adapter",
    )
    tl.backends.register_backend(spec)
    try:
        cells = run_suite("unloadable", fresh=True)["cells"]
    finally:
        tl.backends.unregister_backend("unloadable")
    assert len(cells) == 4 * len(TASKS)
    assert all(
        cell["status"] == "failed"
        and cell["error"].startswith("the adapter does not load: ModuleNotFoundError")
        for cell in cells.values()
    )


def test_an_unknown_backend_is_a_typed_error_not_a_traceback(capsys):
    assert main(["--backend", "caffe", "--check"]) == 2
    assert "[backend_unknown]" in capsys.readouterr().err
