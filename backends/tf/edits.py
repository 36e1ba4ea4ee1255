"""Live ``intervene=`` on eager TensorFlow. TensorFlow's op callbacks are read-only (a returned
replacement is ignored in eager mode), so the kit's entry-point edits
(:mod:`torchlens.adapter_kit.entry_point_edits`) replace values where Python still holds them:
``tl.module`` / ``tl.in_module`` rules at the Keras layer's or ``tf.Module``'s call boundary,
``tl.func`` / ``tl.label`` / ``tl.label_contains`` rules at the return of a curated registry of
``tf.nn`` and ``tf.math`` entry points (``REGISTRY``), wrapped for the capture. A rule that
matches an op whose call never passed through them (a ``gen_*_ops`` or C++ path, an op inside a
composite entry point) raises ``tf_intervene_unreachable``. ``stop_after=`` is not served
(nothing here can end the forward where a value appears)."""

from __future__ import annotations

import functools
from typing import Any, List, Tuple

import tensorflow as tf

from torchlens.adapter_kit.entry_point_edits import EntryPointEdits
from torchlens.edits.actions import Add, CallableAction, Scale, ZeroAblate, _shape_kept

__all__ = ["LiveEdits", "apply_natively"]

#: The wrapped entry points: ``(module path, attribute)``; Keras' TensorFlow backend calls these
#: (``keras.activations.relu`` ends in ``tf.nn.relu``).
REGISTRY = tuple(
    [
        ("nn", name)
        for name in (
            "relu",
            "relu6",
            "elu",
            "selu",
            "gelu",
            "sigmoid",
            "tanh",
            "softmax",
            "log_softmax",
            "softplus",
            "silu",
            "leaky_relu",
            "bias_add",
        )
    ]
    + [("math", name) for name in ("tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "abs", "square")]
)


def apply_natively(adapter: Any, action: Any, value: Any) -> Any:
    """The replacement of ``value`` under ``action``, as a tensor of the same shape and dtype."""
    if isinstance(action, ZeroAblate):
        result = tf.zeros_like(value)
    elif isinstance(action, Scale):
        result = tf.cast(value * tf.cast(action.factor, value.dtype), value.dtype)
    elif isinstance(action, Add):
        delta = action.delta
        if not isinstance(delta, tf.Tensor):
            delta = tf.constant(delta, dtype=value.dtype)
        result = tf.cast(value + tf.cast(delta, value.dtype), value.dtype)
    else:  # a raw callable on the framework's tensor (what it returns becomes a tensor)
        result = action.apply(value, adapter)
        return result if isinstance(result, tf.Tensor) else tf.convert_to_tensor(result)
    _shape_kept(action.describe(), value, result)
    return result


def _entry_points() -> List[Tuple[Any, str]]:
    return [(getattr(tf, owner), name) for owner, name in REGISTRY if getattr(getattr(tf, owner), name, None)]


#: ``intervene=`` on a TensorFlow capture: the kit's entry-point edits over ``REGISTRY``, with the
#: actions TensorFlow applies natively (plus raw callables on ``tf.Tensor``).
LiveEdits = functools.partial(
    EntryPointEdits,
    supported_actions=(ZeroAblate, Scale, Add, CallableAction),
    framework="TensorFlow",
    entry_points=_entry_points,
    unreachable_code="tf_intervene_unreachable",
)
