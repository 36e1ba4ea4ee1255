"""Reading a backend's shipped scorecard (``torchlens/backends/<name>/scorecard.json``, written
by the conformance suite in a checkout) and what is derived from it: the capability summary
(each capability flag supported / unsupported / untested) and the feature table's cells. Nothing
here imports a framework: ``tl.report.doctor()`` and the docs read these.

The three definitions the docs record (docs/backends.md):

* the **feature table**: one row per task of :data:`FEATURE_ROWS`, one column per framework,
  each cell Yes (every case of the row's tasks passed), No (none passed) or Partial (some did;
  its footnote names which did and which refused), from the scorecard's cells;
* the **capability matrix**: one row per backend, one column per capability flag, each cell
  supported (the flag is True and its task passed), unsupported (the flag is False and the task
  refused with a registered code) or untested ("not yet proven": anything else);
* the **graduation items**: see ``conformance/graduation.py`` in a checkout.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from ..adapter_kit.framework_version import installed_version
from ..capability_gate import refusal_codes
from .spec import BackendSpec

#: The cell states a scorecard records.
CELL_STATES = ("passed", "failed", "unsupported", "not_run")

#: Capability flag → the conformance task whose cells prove it.
CAPABILITY_TASKS: Mapping[str, str] = {
    "select_by_function": "select_by_function",
    "select_by_module": "select_by_module",
    "save_selected": "save_selected",
    "save_value_dependent": "save_value_dependent",
    "temporal_selectors": "save_temporal",
    "intervene": "intervene",
    "stop_after": "stop_after",
    "streaming": "streaming",
    "save_grads": "save_grads",
    "backward_ready": "backward_ready",
    "source_lines": "source_lines",
    "draw": "draw",
    "validation_replay": "validation_replay",
    "derived_grads": "derived_grads",
    "sparse_recording": "record",
    "edit_finished_trace": "edit_finished_trace",
}

#: The feature table ("What works on each framework"): row title → the tasks it is made of.
FEATURE_ROWS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    (
        "Select ops by function, module, both, and by influence",
        ("select_by_function", "select_by_module", "select_both", "select_by_influence"),
    ),
    ("Save only chosen ops", ("save_selected", "save_value_dependent", "save_temporal")),
    ("Stop the forward pass early", ("stop_after",)),
    ("Fast repeated recording (tl.record)", ("record",)),
    ("Values, shape, function, module and source line of each op", ("capture", "source_lines")),
    ("Draw the forward graph, and the backward", ("draw", "draw_backward")),
    ("Edit values during a run", ("intervene",)),
    ("Edit a finished trace, patch activations from another run", ("edit_finished_trace", "patching")),
    ("NaN finder, dead units, input-shape guess", ("debug_nan", "debug_dead_units", "debug_input_shape")),
    ("Derived and true gradients", ("derived_grads", "save_grads")),
)

_HERE = os.path.dirname(os.path.abspath(__file__))


def shipped_path(backend: str) -> str:
    """Where a backend's scorecard ships inside the package."""
    return os.path.join(_HERE, backend, "scorecard.json")


def read_scorecard(path: str) -> Optional[dict]:
    """The scorecard at ``path``, or None when there is none."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def shipped_scorecard(backend: str) -> Optional[dict]:
    """The scorecard shipped with the package for ``backend``, or None when none ships."""
    return read_scorecard(shipped_path(backend))


def record_for(scorecard: dict, version: Optional[str] = None) -> Tuple[str, dict]:
    """``(framework version, record)``: the record for ``version`` when the scorecard holds one,
    else the record for the pinned version, else the newest record."""
    records = scorecard["records"]
    for candidate in (version, scorecard["framework"]["pinned"]):
        if candidate is not None and candidate in records:
            return candidate, records[candidate]
    newest = max(records, key=version_key)
    return newest, records[newest]


def version_key(version: str) -> tuple:
    """A sort key for dotted version strings (numeric parts compared as numbers)."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


@dataclass(frozen=True)
class Counts:
    """How many cells of a record are in each state; every cell stays in the denominator."""

    passed: int
    failed: int
    unsupported: int
    not_run: int

    @property
    def denominator(self) -> int:
        return self.passed + self.failed + self.unsupported + self.not_run


def counts(record: dict) -> Counts:
    states = [cell["status"] for cell in record["cells"].values()]
    return Counts(*(states.count(state) for state in CELL_STATES))


def first_failed(record: dict) -> Optional[str]:
    """The case id of the first failed cell, in the record's order."""
    return next((case for case, cell in record["cells"].items() if cell["status"] == "failed"), None)


def task_cells(record: dict, task: str) -> List[dict]:
    """Every cell of one task (over the standard models)."""
    return [cell for case, cell in record["cells"].items() if case.split("/", 1)[1] == task]


def capability_state(flag: bool, cells: List[dict], registered_codes: Optional[set] = None) -> str:
    """``supported``, ``unsupported`` or ``untested`` for one capability (see the module doc)."""
    passed = any(cell["status"] == "passed" for cell in cells)
    refused = [cell for cell in cells if cell["status"] == "unsupported"]
    if flag and passed:
        return "supported"
    if not flag and not passed and refused:
        if registered_codes is None or all(cell["code"] in registered_codes for cell in refused):
            return "unsupported"
    return "untested"


def capability_summary(
    flags: Mapping[str, bool], record: dict, registered_codes: Optional[set] = None
) -> Dict[str, str]:
    """Capability flag → supported / unsupported / untested, from one scorecard record."""
    return {
        capability: capability_state(
            bool(flags.get(capability, False)), task_cells(record, task), registered_codes
        )
        for capability, task in CAPABILITY_TASKS.items()
    }


def feature_cell(record: dict, tasks: Tuple[str, ...]) -> Tuple[str, str]:
    """``(Yes | Partial | No, footnote)`` for one feature-table row: the footnote of a Partial
    cell says which tasks passed, which refused (with their codes) and which did not run."""
    by_task = {task: task_cells(record, task) for task in tasks}
    all_cells = [cell for cells in by_task.values() for cell in cells]
    if all_cells and all(cell["status"] == "passed" for cell in all_cells):
        return "Yes", ""
    if not any(cell["status"] == "passed" for cell in all_cells):
        return "No", _footnote(by_task)
    return "Partial", _footnote(by_task)


def _footnote(by_task: Mapping[str, List[dict]]) -> str:
    parts = []
    for task, cells in by_task.items():
        states = sorted({cell["status"] for cell in cells})
        codes = sorted({cell["code"] for cell in cells if cell["status"] == "unsupported"})
        passed = sum(cell["status"] == "passed" for cell in cells)
        if states == ["passed"]:
            parts.append(f"{task}: works")
        elif passed:
            parts.append(f"{task}: works on {passed} of {len(cells)} models")
        elif codes:
            parts.append(f"{task}: refused ({', '.join(codes)})")
        else:
            parts.append(f"{task}: {', '.join(states)}")
    return "; ".join(parts)


class CapabilitySummary(Mapping[str, str]):
    """A backend's capability summary (``tl.backends.<name>.capability_summary``): capability
    flag → supported / unsupported / untested, derived from the shipped scorecard's record for
    the installed framework version (or the pinned one). Read on first use; every flag is
    untested where no scorecard ships."""

    def __init__(self, spec: BackendSpec) -> None:
        self.spec = spec
        self.backend = spec.name
        self._states: Optional[Dict[str, str]] = None

    def _load(self) -> Dict[str, str]:
        if self._states is None:
            spec = self.spec
            scorecard = shipped_scorecard(spec.name)
            if scorecard is None or not scorecard.get("records"):
                self._states = dict.fromkeys(CAPABILITY_TASKS, "untested")
            else:
                _, record = record_for(scorecard, installed_version(spec.requirement.module))
                self._states = capability_summary(spec.capabilities, record, set(refusal_codes()))
        return self._states

    def __getitem__(self, capability: str) -> str:
        return self._load()[capability]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"<CapabilitySummary {self.backend}: {self._load()}>"
