"""The PaddlePaddle backend's declaration. Planned: every request refuses with ``backend_not_built``
until its adapter lands in this folder."""

from __future__ import annotations

from ..spec import planned_backend

SPEC = planned_backend("paddle", "paddle", ("3.3", "3.4", "3.3.1"), "paddle", ("paddle",))
