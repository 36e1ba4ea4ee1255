"""The lockstep check (scripts/checks/backend_docs_lockstep.py) passes on the checkout, and
fails in each direction: a capability flag changed without the scorecard, a scorecard cell
changed without the docs, a docs table changed without the scorecard, a page's can / cannot
table edited by hand, and a stable label without a decision or graduation."""

from __future__ import annotations

import dataclasses
import json
import os

import conformance_paths  # noqa: F401

import conformance.scorecard as scorecards
import torchlens as tl
from scripts.checks import backend_docs_lockstep as lockstep
from torchlens.backends import registry
from torchlens.backends.matrix import render


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_the_checkout_is_in_lockstep():
    assert lockstep.problems() == []
    assert lockstep.main([]) == 0


def _replace_spec(monkeypatch, name, **changes):
    spec = dataclasses.replace(tl.backends.get_spec(name), **changes)
    monkeypatch.setitem(registry._SPECS, name, spec)
    monkeypatch.setitem(registry._BUILT_IN, name, spec)
    return spec


def test_a_flag_changed_without_the_scorecard_fails(monkeypatch):
    spec = tl.backends.get_spec("jax")
    _replace_spec(monkeypatch, "jax", capabilities={**spec.capabilities, "draw": False})
    found = lockstep.problems()
    assert any("jax: capability flags changed" in problem and "draw" in problem for problem in found)
    # The docs tables move with the flag too (the draw cell is no longer "supported").
    assert any("docs/backends.md's tables differ" in problem for problem in found)


def test_a_scorecard_cell_changed_without_the_others_fails():
    kept = json.loads(_read(os.path.join(conformance_paths.ROOT, "scorecards", "jax.json")))
    for record in kept["records"].values():
        record["cells"]["mlp/draw"] = {"status": "failed", "error": "edited by hand"}
    assert any("differ" in problem for problem in lockstep.scorecard_problems("jax", kept=json.dumps(kept)))


def test_a_docs_table_changed_without_the_scorecard_fails():
    doc = _read(os.path.join(conformance_paths.ROOT, "docs", "backends.md"))
    block = render()
    edited = doc.replace(
        block, block.replace("| jax | supported |", "| jax | unsupported |", 1).replace("Yes", "No", 1)
    )
    assert edited != doc
    assert any("tables differ" in problem for problem in lockstep.problems(backends_doc=edited))


def test_a_page_table_edited_by_hand_fails():
    page = _read(lockstep.page_path("jax"))
    edited = page.replace("| draw | supported |", "| draw | unsupported |")
    assert edited != page
    assert lockstep.page_problems("jax", page_text=page) == []
    assert any(
        "can / cannot table differs" in problem for problem in lockstep.page_problems("jax", page_text=edited)
    )


def test_stable_needs_a_decision_and_graduation(monkeypatch):
    _replace_spec(monkeypatch, "jax", maturity="stable")
    found = lockstep.maturity_problems("jax", "")
    assert any("without a decision line" in problem for problem in found)
    # jax's shipped records pass graduation items 2-5 now (its minimum, 0.7.1, has a passing
    # record); a scorecard with no record on the supported minimum fails item 5.
    assert not any("graduation item" in problem for problem in found)
    real = scorecards.load("jax")
    minimum = real["framework"]["minimum"]
    without_minimum = {
        **real,
        "records": {
            version: record
            for version, record in real["records"].items()
            if version != minimum and not version.startswith(minimum + ".")
        },
    }
    monkeypatch.setattr(scorecards, "load", lambda backend: without_minimum)
    found = lockstep.maturity_problems("jax", "Decision: jax is stable")
    assert len(found) == 1 and "graduation item 5 fails: no record on the supported minimum" in found[0]
