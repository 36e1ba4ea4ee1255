"""Holds the docs, the scorecards and the registry to one another (run by ``make test``):

* the generated block of ``docs/backends.md`` (backends, feature table, capability matrix)
  equals what the registry and the shipped scorecards produce;
* each built backend's scorecard in ``scorecards/`` equals the copy the package ships, and was
  written against the current declaration (maturity, framework requirement, capability flags);
* each built backend has a docs page under ``docs/backends/`` naming its install extra and pinned
  version, whose can / cannot table equals the shipped capability summary;
* maturity: ``planned`` exactly for backends not built; ``stable`` only with a decision line in
  ``docs/backends.md`` (``Decision: <name> is stable``) and a scorecard that meets the
  graduation items a record can show (2 to 5).

python scripts/checks/backend_docs_lockstep.py            (exit 1 and one line per problem)
"""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")


def _read(path: str) -> Optional[str]:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def page_path(backend: str) -> Optional[str]:
    """The backend's docs page (``docs/backends/<name or alias>.md``), or None."""
    from torchlens.backends import get_spec

    spec = get_spec(backend)
    for name in (spec.name,) + tuple(spec.aliases):
        path = os.path.join(DOCS, "backends", f"{name}.md")
        if os.path.exists(path):
            return path
    return None


def page_problems(backend: str, page_text: Optional[str] = None) -> List[str]:
    """What is wrong with one backend's page (``page_text`` stands in for the file)."""
    from torchlens.backends import get_spec
    from torchlens.backends.matrix import PAGE_END, PAGE_START, generated_block, render_page_table

    spec = get_spec(backend)
    path = page_path(backend)
    text = page_text if page_text is not None else (_read(path) if path else None)
    if text is None:
        return [f"{backend}: no docs page docs/backends/{backend}.md"]
    problems = []
    requirement = spec.requirement
    for needed in (f"torchlens[{requirement.extra}]", requirement.pinned):
        if needed not in text:
            problems.append(f"{backend}: its page does not name {needed}")
    table = generated_block(text, PAGE_START, PAGE_END)
    if table is None:
        problems.append(f"{backend}: its page has no generated can / cannot table")
    elif table != render_page_table(spec):
        problems.append(f"{backend}: its can / cannot table differs from the shipped capability summary")
    return problems


def scorecard_problems(backend: str, kept: Optional[str] = None, shipped: Optional[str] = None) -> List[str]:
    """The scorecard in ``scorecards/`` against the package's copy and the declaration
    (``kept`` and ``shipped`` stand in for the files' text)."""
    from torchlens.backends import capability_names, get_spec
    from torchlens.backends.scorecard import shipped_path

    spec = get_spec(backend)
    kept = kept if kept is not None else _read(os.path.join(ROOT, "scorecards", f"{backend}.json"))
    shipped = shipped if shipped is not None else _read(shipped_path(backend))
    if kept is None:
        return [
            f"{backend}: no scorecard in scorecards/{backend}.json "
            f"(python -m tests.conformance.scorecard --backend {backend} --write)"
        ]
    problems = []
    if shipped != kept:
        problems.append(
            f"{backend}: scorecards/{backend}.json and the shipped "
            f"torchlens/backends/{backend}/scorecard.json differ"
        )
    scorecard = json.loads(kept)
    flags = {name: bool(spec.capabilities.get(name, False)) for name in capability_names()}
    if scorecard.get("flags") != flags:
        changed = sorted(name for name in flags if scorecard.get("flags", {}).get(name) != flags[name])
        problems.append(
            f"{backend}: capability flags changed since the scorecard was written "
            f"({', '.join(changed)}); rerun --write"
        )
    if scorecard.get("maturity") != spec.maturity:
        problems.append(f"{backend}: maturity changed since the scorecard was written; rerun --write")
    requirement = spec.requirement
    if scorecard.get("framework", {}).get("pinned") != requirement.pinned:
        problems.append(
            f"{backend}: the framework requirement changed since the scorecard was written; rerun --write"
        )
    return problems


def maturity_problems(backend: str, backends_doc: str) -> List[str]:
    from torchlens.backends import get_spec

    spec = get_spec(backend)
    if (spec.adapter is None) != (spec.maturity == "planned"):
        return [
            f"{backend}: maturity {spec.maturity!r} but the backend is "
            f"{'not ' if spec.adapter is None else ''}built"
        ]
    if spec.maturity != "stable":
        return []
    problems = []
    if f"Decision: {backend} is stable" not in backends_doc:
        problems.append(f"{backend}: labelled stable without a decision line in docs/backends.md")
    sys.path.insert(0, ROOT)
    from conformance.graduation import flags_proven, minimum_and_newest, no_failed_or_not_run, tamper_suite
    from conformance.scorecard import load

    scorecard = load(backend)
    if scorecard is None:
        return problems + [f"{backend}: labelled stable with no scorecard"]
    for number, item in (
        (2, no_failed_or_not_run),
        (3, flags_proven),
        (4, tamper_suite),
        (5, minimum_and_newest),
    ):
        ok, reason = item(backend, scorecard)
        if not ok:
            problems.append(f"{backend}: labelled stable but graduation item {number} fails: {reason}")
    return problems


def problems(backends_doc: Optional[str] = None) -> List[str]:
    """Every lockstep problem (``backends_doc`` stands in for docs/backends.md)."""
    from torchlens.backends.matrix import generated_block, render
    from torchlens.backends.registry import built_in_specs

    doc = backends_doc if backends_doc is not None else _read(os.path.join(DOCS, "backends.md")) or ""
    found = []
    block = generated_block(doc)
    if block is None:
        found.append("docs/backends.md has no generated block")
    elif block != render():
        found.append(
            "docs/backends.md's tables differ from the registry and scorecards "
            "(python scripts/checks/backend_docs_lockstep.py --fix)"
        )
    for spec in sorted(built_in_specs(), key=lambda spec: spec.name):
        found += maturity_problems(spec.name, doc)
        if spec.adapter is None:
            continue
        found += scorecard_problems(spec.name)
        found += page_problems(spec.name)
    return found


def fix() -> None:
    """Regenerates the generated blocks of docs/backends.md and of each backend page."""
    from torchlens.backends.matrix import PAGE_END, PAGE_START, render, render_page_table, replace_block
    from torchlens.backends.registry import built_in_specs

    path = os.path.join(DOCS, "backends.md")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(replace_block(text, render()))
    for spec in built_in_specs():
        page = page_path(spec.name) if spec.adapter is not None else None
        text = _read(page) if page else None
        if text is not None and PAGE_START in text:
            with open(page, "w", encoding="utf-8") as handle:
                handle.write(replace_block(text, render_page_table(spec), PAGE_START, PAGE_END))


def main(argv: List[str]) -> int:
    if "--fix" in argv:
        fix()
    found = problems()
    for problem in found:
        print(problem)
    print(f"backend docs lockstep: {'ok' if not found else f'{len(found)} problem(s)'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
