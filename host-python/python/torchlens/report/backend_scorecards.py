"""``tl.report.doctor()``: one row per registered backend, read from the scorecard shipped with
the package only. Frameworks are never imported: installed versions come from package
metadata."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import List, Optional

from ..adapter_kit.framework_version import installed_version
from ..backends.registry import specs
from ..backends.scorecard import counts, first_failed, record_for, shipped_scorecard


@dataclass(frozen=True)
class DoctorRow:
    """One backend's row. ``status`` is ``pass`` (a record ships and no cell failed),
    ``known_broken`` (a cell failed), ``scope`` (the framework is not installed here) or
    ``not_tested`` (no record ships)."""

    key: str
    status: str
    details: str
    suggestion: str


@dataclass(frozen=True)
class DoctorReport:
    """The rows; ``str()`` is a terminal table, Jupyter shows an HTML table."""

    rows: List[DoctorRow]

    def row(self, key: str) -> DoctorRow:
        return next(row for row in self.rows if row.key == key)

    def __str__(self) -> str:
        headers = ("key", "status", "details", "suggestion")
        table = [headers] + [(row.key, row.status, row.details, row.suggestion) for row in self.rows]
        widths = [max(len(line[column]) for line in table) for column in range(len(headers))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]
        lines.insert(1, "  ".join("-" * width for width in widths))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cells = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(value)}</td>"
                for value in (row.key, row.status, row.details, row.suggestion)
            )
            + "</tr>"
            for row in self.rows
        )
        return (
            "<table><thead><tr><th>key</th><th>status</th><th>details</th><th>suggestion</th></tr></thead>"
            f"<tbody>{cells}</tbody></table>"
        )

    def __repr__(self) -> str:
        return str(self)


def _row(spec) -> DoctorRow:
    requirement = spec.requirement
    installed: Optional[str] = installed_version(requirement.module)
    scorecard = shipped_scorecard(spec.name)
    key = f"backend_scorecard:{spec.name}"
    install = f"pip install 'torchlens[{requirement.extra}]'"
    supported = f"supported [{requirement.minimum}, {requirement.ceiling})"
    versions = f"pinned {requirement.pinned}, installed {installed or 'absent'}, {supported}"
    if scorecard is None or not scorecard.get("records"):
        return DoctorRow(
            key,
            "not_tested",
            f"{spec.maturity}; no scorecard ships; {versions}",
            install if installed is None else "run the conformance suite in a checkout",
        )
    version, record = record_for(scorecard, installed)
    tally = counts(record)
    details = (
        f"{spec.maturity}; {tally.passed}/{tally.denominator} cells passed, {tally.unsupported} unsupported, "
        f"{tally.failed} failed; {versions}"
    )
    failed = first_failed(record)
    if installed is None:
        return DoctorRow(key, "scope", details, install)
    if failed is not None:
        return DoctorRow(key, "known_broken", details, f"first failed cell: {failed} (record for {version})")
    return DoctorRow(key, "pass", details, "-")


def doctor() -> DoctorReport:
    """One row per registered backend (key ``backend_scorecard:<name>``), read from the shipped
    scorecards only; no framework is imported."""
    return DoctorReport([_row(spec) for spec in sorted(specs(), key=lambda spec: spec.name)])
