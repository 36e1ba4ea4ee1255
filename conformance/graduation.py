"""The six graduation items (``--graduation``). Each is checked and printed with pass/fail and
its reason; maturity never changes here (it changes on a recorded maintainer decision, a line in
docs/backends.md, which the lockstep check holds to this result's static items).

1. the shipped scorecard is reproduced exactly by ``--check`` on the pinned framework version;
2. no failed and no not_run cell;
3. every capability flag proven: each True flag by a passing cell, each False flag by an
   unsupported cell whose refusal code is registered (no "untested");
4. the tamper tasks all pass (validation catches every tampering, and no op counts as a
   replayed pass without a replay);
5. the shipped scorecard holds passing records for the supported minimum and the newest
   installable release, and the install extra admits both;
6. the backend's docs page exists, its tutorial runs, and its can / cannot table matches the
   shipped capability summary (the lockstep check)."""

from __future__ import annotations

import importlib.metadata
import os
import re
from typing import Callable, List, Optional, Tuple

import torchlens as tl
from torchlens.backends.scorecard import (
    capability_summary,
    counts,
    installed_version,
    shipped_scorecard,
    version_key,
)

from .scorecard import ROOT, compare, load

Item = Tuple[bool, str]


def _pinned_record(scorecard: dict) -> Optional[dict]:
    return scorecard["records"].get(scorecard["framework"]["pinned"])


def _no_pin_record(scorecard: dict) -> Item:
    return False, f"no record for the pin {scorecard['framework']['pinned']}"


def reproduced_on_pin(backend: str, scorecard: dict) -> Item:
    spec = tl.backends.get_spec(backend)
    installed = installed_version(spec.requirement.module)
    if installed != spec.requirement.pinned:
        return (
            False,
            f"installed {installed}, pinned {spec.requirement.pinned}: "
            "run --check on the pin (make test-pins)",
        )
    ok, lines = compare(backend)
    return ok, "reproduced by --check" if ok else "; ".join(lines[1:4])


def no_failed_or_not_run(backend: str, scorecard: dict) -> Item:
    record = _pinned_record(scorecard)
    if record is None:
        return _no_pin_record(scorecard)
    tally = counts(record)
    if tally.failed or tally.not_run:
        bad = [case for case, cell in record["cells"].items() if cell["status"] in ("failed", "not_run")]
        return False, f"{tally.failed} failed, {tally.not_run} not_run (first: {', '.join(bad[:3])})"
    return True, f"{tally.passed} passed, {tally.unsupported} unsupported of {tally.denominator}"


def flags_proven(backend: str, scorecard: dict) -> Item:
    record = _pinned_record(scorecard)
    if record is None:
        return _no_pin_record(scorecard)
    spec = tl.backends.get_spec(backend)
    summary = capability_summary(spec.capabilities, record, set(tl.backends.REFUSAL_CODES))
    untested = [flag for flag, state in summary.items() if state == "untested"]
    if untested:
        return False, f"not yet proven: {', '.join(untested)}"
    return True, f"{len(summary)} flags proven"


def tamper_suite(backend: str, scorecard: dict) -> Item:
    record = _pinned_record(scorecard)
    if record is None:
        return _no_pin_record(scorecard)
    tamper = {
        case: cell for case, cell in record["cells"].items() if case.split("/", 1)[1].startswith("tamper_")
    }
    # A tampering that needs a capability the backend refuses (a stripped edit record where
    # edits are refused) cannot happen there: a typed refusal is not a miss.
    bad = [
        f"{case} {cell['status']}"
        for case, cell in tamper.items()
        if cell["status"] not in ("passed", "unsupported")
    ]
    refused = sum(cell["status"] == "unsupported" for cell in tamper.values())
    if bad:
        return False, "; ".join(bad[:4]) + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
    return True, f"{len(tamper) - refused} tamper cells passed, {refused} refused (capability not offered)"


def _extra_requirements(extra: str) -> List[str]:
    """The requirement strings of an install extra in pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(rf"^{re.escape(extra)} = \[(.*?)\]$", text, re.M)
    return re.findall(r'"([^"]+)"', match.group(1)) if match else []


def _not_admitted(extra: str, distributions: List[str], versions: List[str]) -> List[str]:
    """The versions the extra's requirement on the framework does not admit."""
    from packaging.requirements import Requirement

    framework = [
        req for req in map(Requirement, _extra_requirements(extra)) if req.name.lower() in distributions
    ]
    return [version for version in versions if not any(req.specifier.contains(version) for req in framework)]


def minimum_and_newest(backend: str, scorecard: dict) -> Item:
    framework = scorecard["framework"]
    records = scorecard["records"]
    passing = [
        version
        for version, record in records.items()
        if not counts(record).failed and not counts(record).not_run
    ]
    on_minimum = [
        version
        for version in records
        if version == framework["minimum"] or version.startswith(framework["minimum"] + ".")
    ]
    at_minimum = [version for version in on_minimum if version in passing]
    problems = []
    if not on_minimum:
        problems.append(
            f"no record on the supported minimum {framework['minimum']} (records: {', '.join(records)})"
        )
    elif not at_minimum:
        problems.append(
            f"the record on the supported minimum ({', '.join(on_minimum)}) has failed or not_run cells"
        )
    newest = max(records, key=version_key)
    if newest not in passing:
        problems.append(f"the newest record {newest} has failed or not_run cells")
    module = framework["module"]
    distributions = [name.lower() for name in importlib.metadata.packages_distributions().get(module, ())]
    refused = _not_admitted(framework["extra"], distributions + [module], at_minimum[:1] + [newest])
    if refused:
        problems.append(f"the extra torchlens[{framework['extra']}] does not admit {', '.join(refused)}")
    return (not problems), "; ".join(problems) or f"passing on {at_minimum[0]} and {newest}"


def docs_page(backend: str, scorecard: dict) -> Item:
    from scripts.checks.backend_docs_lockstep import page_path, page_problems

    path = page_path(backend)
    if path is None:
        return False, f"no docs page docs/backends/{backend}.md"
    tests = os.path.join(ROOT, "host-python", "tests")
    page = os.path.basename(path)
    runs_tutorial = any(
        f'run_tutorial("{page}")' in open(os.path.join(tests, name), encoding="utf-8").read()
        for name in os.listdir(tests)
        if name.endswith(".py")
    )
    problems = page_problems(backend)
    if not runs_tutorial:
        problems.append(f"no test runs the tutorial of {page}")
    return (not problems), "; ".join(problems) or f"{page}: tutorial tested, can / cannot table in lockstep"


ITEMS: Tuple[Tuple[str, Callable[[str, dict], Item]], ...] = (
    ("shipped scorecard reproduced by --check on the pinned version", reproduced_on_pin),
    ("no failed and no not_run cell", no_failed_or_not_run),
    ("every capability flag proven", flags_proven),
    ("tamper suite caught every tampering", tamper_suite),
    ("passes on the supported minimum and the newest release", minimum_and_newest),
    ("docs page, tested tutorial, can / cannot table in lockstep", docs_page),
)


def grade(backend: str) -> List[Tuple[str, bool, str]]:
    """``(item, passed, reason)`` for the six items."""
    scorecard = load(backend)
    if scorecard is None or shipped_scorecard(backend) != scorecard:
        reason = "no scorecard" if scorecard is None else "the shipped copy differs from scorecards/"
        return [(title, False, reason) for title, _ in ITEMS]
    return [(title, *_checked(check, backend, scorecard)) for title, check in ITEMS]


def _checked(check: Callable[[str, dict], Item], backend: str, scorecard: dict) -> Item:
    # An item that cannot be checked here fails with the reason; it never passes by default.
    try:
        return check(backend, scorecard)
    except Exception as error:
        return False, f"could not be checked: {type(error).__name__}: {error}"


def graduation(backend: str) -> int:
    results = grade(backend)
    maturity = tl.backends.get_spec(backend).maturity
    print(f"{backend} (maturity {maturity}; graduation never changes it)")
    for number, (title, ok, reason) in enumerate(results, 1):
        print(f"  {number}. [{'pass' if ok else 'FAIL'}] {title}: {reason}")
    passed = all(ok for _, ok, _ in results)
    print(f"{backend}: graduation {'passed' if passed else 'not passed'}")
    return 0 if passed else 1
