"""The TensorFlow backend's declaration: read by the registry without importing TensorFlow
(routing reads ``sys.modules`` only, so it never imports a framework the caller has not)."""

from __future__ import annotations

from ..spec import FrameworkRequirement, built_backend, detect_instances, preview_option_values

SPEC = built_backend(
    "tf",
    aliases=("tensorflow",),
    requirement=FrameworkRequirement("tensorflow", "2.16", "2.22", "2.21.0", "tf"),
    array_modules=("tensorflow", "keras"),
    implemented={
        "save_selected": "torchlens.backends.tf.adapter:TFAdapter.capture",
        "derived_grads": "torchlens.backends.tf.grads:GradHooks",
        "intervene": "torchlens.backends.tf.edits:LiveEdits",
    },
    option_values=preview_option_values("object_module"),
    adapter="torchlens.backends.tf.adapter:TFAdapter",
    example="torchlens.backends.tf.example:example",
    # A ``tf.Module`` or a Keras layer or model (only when the caller imported them). A callable
    # given ``tf.Tensor`` inputs is routed by the registry's shared rule.
    detect=detect_instances("tensorflow:Module", "keras:Layer"),
)
