"""Reports about this installation: ``tl.report.doctor()`` reads each backend's shipped
scorecard (no framework is imported)."""

from __future__ import annotations

from .backend_scorecards import DoctorReport, DoctorRow, doctor

__all__ = ["DoctorReport", "DoctorRow", "doctor"]
