"""``python -m tests.conformance.scorecard --backend <name> --write | --check | --graduation``
(also ``python -m conformance.scorecard``), from a checkout's root.

``--write`` runs the suite and stores the record for the installed framework version in
``scorecards/<name>.json`` (the one copy in the tree; the build ships it in the wheel as
``torchlens/backends/<name>/scorecard.json``) and refreshes the installed package's copy so the
package sees it without a reinstall (records for other versions are kept). ``--check`` runs the
suite and compares every cell's state (and refusal code) with the record for the installed
version, saying which it used. ``--graduation`` prints the six graduation items with pass/fail
and the reason; it never changes maturity."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional, Tuple

import torchlens as tl
from torchlens.backends.scorecard import read_scorecard, shipped_path, version_key
from torchlens.errors import TorchLensError

from .models import MODEL_NAMES
from .runner import run_suite
from .tasks import TASKS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = 1


def scorecard_path(backend: str) -> str:
    """The scorecard kept in the repository (the package's copy ships in the wheel)."""
    return os.path.join(ROOT, "scorecards", f"{backend}.json")


def load(backend: str) -> Optional[dict]:
    """The scorecard kept in the repository, or None."""
    return read_scorecard(scorecard_path(backend))


def dumps(scorecard: dict) -> str:
    return json.dumps(scorecard, indent=1, sort_keys=False) + "\n"


def declared(backend: str) -> dict:
    """What the scorecard states about the declaration it was written against."""
    spec = tl.backends.get_spec(backend)
    requirement = spec.requirement
    return {
        "backend": spec.name,
        "schema": SCHEMA,
        "maturity": spec.maturity,
        "framework": {
            "module": requirement.module,
            "minimum": requirement.minimum,
            "ceiling": requirement.ceiling,
            "pinned": requirement.pinned,
            "extra": requirement.extra,
        },
        "flags": {name: bool(spec.capabilities.get(name, False)) for name in tl.backends.capability_names()},
        "models": list(MODEL_NAMES),
        "tasks": list(TASKS),
    }


def write(backend: str) -> int:
    run = run_suite(backend)
    previous = load(backend) or {}
    scorecard = declared(backend)
    records = dict(previous.get("records", {}))
    records[run["framework_version"]] = {"cells": run["cells"]}
    scorecard["records"] = dict(sorted(records.items(), key=lambda item: version_key(item[0])))
    text = dumps(scorecard)
    for path in (scorecard_path(backend), shipped_path(backend)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    print(
        f"{backend}: wrote the record for {run['framework_version']} ({run['seconds']} s) "
        f"to {scorecard_path(backend)} and {shipped_path(backend)}"
    )
    return 0


def compare(backend: str) -> Tuple[bool, List[str]]:
    """Runs the suite and compares it with the record for the installed version."""
    run = run_suite(backend)
    scorecard = load(backend)
    version = run["framework_version"]
    if scorecard is None:
        return False, [f"{backend}: no scorecard at {scorecard_path(backend)}; run --write"]
    problems = []
    if version not in scorecard["records"]:
        return False, [
            f"{backend}: the scorecard holds no record for the installed {version} "
            f"(it has {', '.join(scorecard['records'])}); run --write"
        ]
    lines = [f"{backend}: compared with the record for {version} ({run['seconds']} s)"]
    current = declared(backend)
    for key in ("maturity", "framework", "flags", "models", "tasks"):
        if scorecard.get(key) != current[key]:
            problems.append(f"{backend}: the scorecard's {key} differs from the declaration; run --write")
    recorded = scorecard["records"][version]["cells"]
    for case in sorted(set(recorded) | set(run["cells"])):
        was, now = recorded.get(case), run["cells"].get(case)
        if _state(was) != _state(now):
            problems.append(f"{backend}: {case} was {_state(was)}, now {_state(now)}{_why(now)}")
    return not problems, lines + problems


def _state(cell: Optional[dict]) -> str:
    if cell is None:
        return "absent"
    return f"unsupported ({cell['code']})" if cell["status"] == "unsupported" else cell["status"]


def _why(cell: Optional[dict]) -> str:
    reason = (cell or {}).get("error") or (cell or {}).get("reason")
    return f": {reason}" if reason else ""


def check(backend: str) -> int:
    ok, lines = compare(backend)
    print("\n".join(lines))
    print(f"{backend}: --check {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance.scorecard", description=__doc__)
    parser.add_argument("--backend", required=True, action="append", help="a registered backend (repeatable)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true")
    action.add_argument("--check", action="store_true")
    action.add_argument("--graduation", action="store_true")
    options = parser.parse_args(argv)
    try:
        names = [tl.backends.get_spec(backend).name for backend in options.backend]
        for backend in names:
            tl.backends.require_framework(tl.backends.get_spec(backend))
    except TorchLensError as error:
        # Bad input (an unknown backend, a framework not installed here): the typed error and
        # its remedy, no traceback.
        print(f"error: {error}", file=sys.stderr)
        return 2
    status = 0
    for backend in names:
        if options.write:
            status |= write(backend)
        elif options.check:
            status |= check(backend)
        else:
            from .graduation import graduation

            status |= graduation(backend)
    return status


if __name__ == "__main__":
    sys.exit(main())
