"""The tinygrad backend's declaration. Planned: every request refuses with ``backend_not_built``
until its adapter lands in this folder."""

from __future__ import annotations

from ..spec import planned_backend

SPEC = planned_backend("tinygrad", "tinygrad", ("0.13", "0.14", "0.13.0"), "tinygrad", ("tinygrad",))
