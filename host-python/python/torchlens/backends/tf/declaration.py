"""The TensorFlow backend's declaration. Planned: every request refuses with ``backend_not_built``
until its adapter lands in this folder."""

from __future__ import annotations

from ..spec import planned_backend

SPEC = planned_backend(
    "tf", "tensorflow", ("2.16", "2.22", "2.21.0"), "tf", ("tensorflow", "keras"), aliases=("tensorflow",)
)
