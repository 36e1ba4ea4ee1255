"""The PaddlePaddle backend's declaration: read by the registry without importing Paddle (and
routing never imports Paddle: it is read from ``sys.modules`` only, because Paddle crashes when
first imported after TensorFlow)."""

from __future__ import annotations

import sys
from typing import Any

from ..spec import (
    BackendSpec,
    FrameworkRequirement,
    implemented_by,
    package_capabilities,
    package_implementations,
)


def _detect(model: Any, inputs: Any) -> bool:
    """A ``paddle.nn.Layer`` (only when the caller imported Paddle). A callable given paddle
    Tensors is routed by the registry's shared rule."""
    paddle = sys.modules.get("paddle")
    if paddle is None:
        return False
    layer = getattr(getattr(paddle, "nn", None), "Layer", None)
    return layer is not None and isinstance(model, layer)


SPEC = BackendSpec(
    name="paddle",
    aliases=("paddlepaddle",),
    maturity="preview",
    requirement=FrameworkRequirement("paddle", "3.3", "3.4", "3.3.1", "paddle"),
    array_modules=("paddle",),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(
        save_selected=True, derived_grads=True, intervene=True, stop_after=True
    ),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("torchlens.backends.paddle.adapter:PaddleAdapter.capture"),
        "derived_grads": implemented_by("torchlens.backends.paddle.grads:GradHooks"),
        "intervene": implemented_by("torchlens.backends.paddle.edits:LiveEdits"),
        "stop_after": implemented_by("torchlens.backends.paddle.edits:LiveEdits"),
    },
    option_values={
        "module_identity_mode": ("function_root", "object_module"),
        "payload_policy": ("array_payloads",),
    },
    adapter="torchlens.backends.paddle.adapter:PaddleAdapter",
    example="torchlens.backends.paddle.example:example",
    detect=_detect,
)
