"""The MLX backend's declaration: read by the registry without importing MLX."""

from __future__ import annotations

import sys
from typing import Any

from ..spec import (
    BackendSpec,
    FrameworkRequirement,
    detect_by_type_module,
    implemented_by,
    package_capabilities,
    package_implementations,
)

_owned_by_mlx = detect_by_type_module("mlx")


def _detect(model: Any, inputs: Any) -> bool:
    """An ``mlx.nn.Module`` (any object whose type lives in ``mlx``). A plain callable given
    ``mx.array`` inputs is routed by the registry's shared rule."""
    if _owned_by_mlx(model, inputs):
        return True
    module_type = getattr(sys.modules.get("mlx.nn"), "Module", None)
    return module_type is not None and isinstance(model, module_type)


SPEC = BackendSpec(
    name="mlx",
    aliases=(),
    maturity="preview",
    # The spec pins 0.26; the range covers 0.26 through the newest release (0.32 today).
    requirement=FrameworkRequirement("mlx", "0.26", "0.33", "0.26.5", "mlx"),
    array_modules=("mlx",),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(
        save_selected=True, derived_grads=True, intervene=True, stop_after=True
    ),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("torchlens.backends.mlx.adapter:MlxAdapter.capture"),
        "derived_grads": implemented_by("torchlens.backends.mlx.grads:GradHooks"),
        "intervene": implemented_by("torchlens.backends.mlx.adapter:MlxAdapter.capture"),
        "stop_after": implemented_by("torchlens.backends.mlx.adapter:MlxAdapter.capture"),
    },
    option_values={
        "module_identity_mode": ("function_root", "object_module"),
        "payload_policy": ("array_payloads",),
    },
    adapter="torchlens.backends.mlx.adapter:MlxAdapter",
    example="torchlens.backends.mlx.example:example",
    detect=_detect,
)
