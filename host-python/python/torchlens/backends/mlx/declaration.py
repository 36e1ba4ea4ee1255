"""The MLX backend's declaration. Planned: every request refuses with ``backend_not_built``
until its adapter lands in this folder."""

from __future__ import annotations

from ..spec import planned_backend

SPEC = planned_backend("mlx", "mlx", ("0.26", "0.27", "0.26.3"), "mlx", ("mlx",))
