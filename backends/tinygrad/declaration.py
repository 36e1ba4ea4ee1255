"""The tinygrad backend's declaration: read by the registry without importing tinygrad."""

from __future__ import annotations

import sys
from typing import Any

from ..spec import FrameworkRequirement, built_backend, detect_by_type_module, preview_option_values

_owned_by_tinygrad = detect_by_type_module("tinygrad")


def _holds_tinygrad_state(model: Any) -> bool:
    """Whether an object's attributes (one level, and the items of list/tuple/dict attributes)
    hold tinygrad Tensors or ``tinygrad.nn`` layers: a user's module-like class. Read only when
    the caller imported tinygrad."""
    tensor_type = getattr(sys.modules.get("tinygrad.tensor"), "Tensor", None)
    if tensor_type is None:
        return False
    try:
        attributes = vars(model)
    except TypeError:
        return False
    for value in attributes.values():
        items = (
            value.values()
            if isinstance(value, dict)
            else value
            if isinstance(value, (list, tuple))
            else (value,)
        )
        for item in items:
            if isinstance(item, tensor_type) or type(item).__module__.split(".", 1)[0] == "tinygrad":
                return True
    return False


def _detect(model: Any, inputs: Any) -> bool:
    """A tinygrad object (``tinygrad.nn`` layer), or a callable object holding tinygrad Tensors
    or layers. A plain callable given tinygrad Tensors is routed by the registry's shared
    rule."""
    if _owned_by_tinygrad(model, inputs):
        return True
    # Given another framework's arrays, the registry never asks; given none, an object holding
    # tinygrad state is a tinygrad model.
    return callable(model) and _holds_tinygrad_state(model)


SPEC = built_backend(
    "tinygrad",
    requirement=FrameworkRequirement("tinygrad", "0.13", "0.15", "0.13.0", "tinygrad"),
    array_modules=("tinygrad",),
    implemented={
        "save_selected": "torchlens.backends.tinygrad.adapter:TinygradAdapter.capture",
        "derived_grads": "torchlens.backends.tinygrad.grads:GradHooks",
    },
    option_values=preview_option_values("object_module"),
    adapter="torchlens.backends.tinygrad.adapter:TinygradAdapter",
    example="torchlens.backends.tinygrad.example:example",
    detect=_detect,
)
