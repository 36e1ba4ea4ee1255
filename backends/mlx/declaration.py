"""The MLX backend's declaration: read by the registry without importing MLX."""

from __future__ import annotations

from ..spec import FrameworkRequirement, built_backend, detect_instances, preview_option_values

SPEC = built_backend(
    "mlx",
    # The spec pins 0.26; the range covers 0.26 through the newest release (0.32 today).
    requirement=FrameworkRequirement("mlx", "0.26", "0.33", "0.26.5", "mlx"),
    array_modules=("mlx",),
    implemented={
        "save_selected": "torchlens.backends.mlx.adapter:MlxAdapter.capture",
        "derived_grads": "torchlens.backends.mlx.grads:GradHooks",
        "intervene": "torchlens.backends.mlx.adapter:MlxAdapter.capture",
        "stop_after": "torchlens.backends.mlx.adapter:MlxAdapter.capture",
    },
    option_values=preview_option_values("object_module"),
    adapter="torchlens.backends.mlx.adapter:MlxAdapter",
    example="torchlens.backends.mlx.example:example",
    # An object whose type lives in ``mlx`` or an ``mlx.nn.Module`` (a user's subclass). A plain
    # callable given ``mx.array`` inputs is routed by the registry's shared rule.
    detect=detect_instances("mlx.nn:Module", type_modules=("mlx",)),
)
