"""The PaddlePaddle backend's declaration: read by the registry without importing Paddle (and
routing never imports Paddle: it is read from ``sys.modules`` only, because Paddle crashes when
first imported after TensorFlow)."""

from __future__ import annotations

from ..spec import FrameworkRequirement, built_backend, detect_instances, preview_option_values

SPEC = built_backend(
    "paddle",
    aliases=("paddlepaddle",),
    requirement=FrameworkRequirement("paddle", "3.3", "3.4", "3.3.1", "paddle"),
    array_modules=("paddle",),
    implemented={
        "save_selected": "torchlens.backends.paddle.adapter:PaddleAdapter.capture",
        "derived_grads": "torchlens.backends.paddle.grads:GradHooks",
        "intervene": "torchlens.backends.paddle.edits:LiveEdits",
        "stop_after": "torchlens.backends.paddle.edits:LiveEdits",
    },
    option_values=preview_option_values("object_module"),
    adapter="torchlens.backends.paddle.adapter:PaddleAdapter",
    example="torchlens.backends.paddle.example:example",
    # A ``paddle.nn.Layer`` (only when the caller imported Paddle). A callable given paddle
    # Tensors is routed by the registry's shared rule.
    detect=detect_instances("paddle:nn.Layer"),
)
