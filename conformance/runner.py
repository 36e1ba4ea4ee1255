"""Running the suite for one backend: every task on every standard model, one cell each."""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import torchlens as tl
from torchlens.backends.scorecard import installed_version
from torchlens.errors import BackendUnsupportedError

from . import tamper  # noqa: F401  (registers the tamper tasks)
from .models import MODEL_NAMES, models_of
from .tasks import TASKS, Case, Task

_RUNS: Dict[str, dict] = {}


def _has(dotted: str) -> bool:
    target: Any = tl
    for part in dotted.split("."):
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return True


def run_cell(case: Optional[Case], task: Task) -> dict:
    """One cell: passed, failed (with the error), unsupported (with the registered refusal
    code) or not_run (with the reason)."""
    if case is None:
        return {"status": "not_run", "reason": "the backend supplies no such model"}
    missing = [name for name in task.requires if not _has(name)]
    if missing:
        return {"status": "not_run", "reason": f"tl.{', tl.'.join(missing)} is not in this build"}
    try:
        task.run(case)
    except BackendUnsupportedError as error:
        if error.code in tl.backends.REFUSAL_CODES:
            return {"status": "unsupported", "code": error.code}
        return {"status": "failed", "error": f"unregistered refusal code {error.code!r}"}
    except Exception as error:  # every other error is the task failing, recorded, never raised
        return _failed(error)
    return {"status": "passed"}


def run_suite(backend: str, fresh: bool = False) -> dict:
    """The record of one run: the framework version and every cell (``<model>/<task>``).
    A run is kept for the process (``--check`` and the feature-table test share it)."""
    if backend in _RUNS and not fresh:
        return _RUNS[backend]
    spec = tl.backends.get_spec(backend)
    tl.backends.require_framework(spec)
    try:
        protocol = tl.backends.get_backend(backend)
    except BackendUnsupportedError:
        raise
    except Exception as error:
        # The adapter does not load on this framework version: every cell failed, for that
        # reason (a record of it, never a crash of the run).
        return _record(
            backend, spec, 0.0, dict.fromkeys(_case_ids(), _failed(error, "the adapter does not load: "))
        )
    supplied = models_of(backend)
    by_name = {model.name: model for model in supplied.models} if supplied else {}
    started = time.perf_counter()
    cells = {}
    for model_name in MODEL_NAMES:
        model = by_name.get(model_name)
        case = Case(backend, supplied, model, protocol) if model is not None else None
        for name, task in TASKS.items():
            cells[f"{model_name}/{name}"] = run_cell(case, task)
    return _record(backend, spec, time.perf_counter() - started, cells)


def _case_ids() -> list:
    return [f"{model_name}/{name}" for model_name in MODEL_NAMES for name in TASKS]


def _failed(error: BaseException, prefix: str = "") -> dict:
    return {"status": "failed", "error": f"{prefix}{type(error).__name__}: {str(error)[:300]}"}


def _record(backend: str, spec: Any, seconds: float, cells: dict) -> dict:
    _RUNS[backend] = {
        "framework_version": installed_version(spec.requirement.module),
        "seconds": round(seconds, 1),
        "cells": cells,
    }
    return _RUNS[backend]
