"""The TensorFlow backend's declaration: read by the registry without importing TensorFlow
(routing reads ``sys.modules`` only, so it never imports a framework the caller has not)."""

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
    """A Keras layer or model, or a ``tf.Module`` (only when the caller imported TensorFlow; a
    callable given ``tf.Tensor`` inputs is routed by the registry's shared rule)."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return False
    module = getattr(tf, "Module", None)
    if module is not None and isinstance(model, module):
        return True
    keras = sys.modules.get("keras")
    layer = getattr(keras, "Layer", None) if keras is not None else None
    return layer is not None and isinstance(model, layer)


SPEC = BackendSpec(
    name="tf",
    aliases=("tensorflow",),
    maturity="preview",
    requirement=FrameworkRequirement("tensorflow", "2.16", "2.22", "2.21.0", "tf"),
    array_modules=("tensorflow", "keras"),
    # Every capability not listed is False: a request for it refuses with its code.
    capabilities=package_capabilities(save_selected=True, derived_grads=True, intervene=True),
    capability_implementations={
        **package_implementations(),
        "save_selected": implemented_by("torchlens.backends.tf.adapter:TFAdapter.capture"),
        "derived_grads": implemented_by("torchlens.backends.tf.grads:GradHooks"),
        "intervene": implemented_by("torchlens.backends.tf.edits:LiveEdits"),
    },
    option_values={
        "module_identity_mode": ("function_root", "object_module"),
        "payload_policy": ("array_payloads",),
    },
    adapter="torchlens.backends.tf.adapter:TFAdapter",
    example="torchlens.backends.tf.example:example",
    detect=_detect,
)
