"""What a TensorFlow capture refuses, each with a stable code and a remedy. Root, option and
Keras-backend checks run before the model is called. A variable write or a random draw inside
the forward is refused before anything changes: by the pre-run graph trace of the call
(``prescan.py``), or, where the call cannot be traced, by the guard as the op is called
(``guard.py``). The op callback, which TensorFlow calls after the op ran, is the last line (an
op called through ``tf.raw_ops`` directly); the capture is then abandoned (no trace returned).

The closed set of refusal codes lives in the core (``core-wasm/src/contract/codes.rs``); the
facts only TensorFlow has carry ``tf_*`` codes."""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

from torchlens.adapter_kit.program_capture import GraphOnlyRefusals
from torchlens.adapter_kit.refusals import Refusals

#: This backend's typed refusals, built by the kit the same way for every backend.
REFUSALS = Refusals("tf")
refuse, option, value_invalid = REFUSALS.refuse, REFUSALS.option, REFUSALS.value_invalid

#: What a graph-only entry (a frozen graph) refuses: the kit's checks, with this backend's codes.
GRAPH_ONLY = GraphOnlyRefusals(
    "tf_graph_only_intervene",
    "trace the eager model or the undecorated Python function to edit values",
    "tf_graph_only_grad",
    "pass the eager model or the undecorated Python function with grad_options",
    "pass the entry's inputs as tf.Tensor arguments, or trace the eager model",
)


#: A random draw in the forward (``what`` says which and where).
rng = REFUSALS.declare(
    "the forward draws random numbers ({}); replay would draw them again",
    "rng_state_in_graph",
    "call the model with training=False (dropout is then the identity), or draw the random "
    "tensor outside the traced call and pass it in",
)

#: A variable write in the forward (``what`` says which and where).
variable_write = REFUSALS.declare(
    "the forward writes a variable ({}) while it is captured; replay and the saved values would "
    "see the new value",
    "tf_variable_write",
    "call the model in inference mode (training=False: batch normalization then reads its "
    "moving statistics without updating them), and build the model before tracing",
)

#: A payload of a dtype with no array encoding (string, resource, variant).
unencodable_payload = REFUSALS.declare(
    "a {} payload has no array encoding in a .tlspec",
    "tf_payload_unencodable",
    "save only dense numeric and bool values (save=tl.func(...) or tl.module(...))",
)


def is_graph_only(model: Any) -> bool:
    """A ``tf.function``, a concrete function (a SavedModel signature is one), a Keras model
    whose ``call`` was compiled into one, or a Keras model's bound ``predict`` (its loop runs
    a compiled step)."""
    graph_types = (tf.types.experimental.PolymorphicFunction, tf.types.experimental.ConcreteFunction)
    return (
        isinstance(model, graph_types)
        or isinstance(getattr(model, "call", None), graph_types)
        or keras_predict_owner(model) is not None
    )


def keras_predict_owner(model: Any) -> Any:
    """The Keras model whose bound ``predict`` method ``model`` is, or None."""
    owner = getattr(model, "__self__", None)
    if getattr(model, "__name__", None) != "predict" or owner is None:
        return None
    keras = sys.modules.get("keras")
    return owner if keras is not None and isinstance(owner, keras.Layer) else None


def keras_backend(model: Any) -> None:
    """A Keras model must run on the TensorFlow Keras backend (checked before anything runs or
    is built)."""
    keras = sys.modules.get("keras")
    model = keras_predict_owner(model) or model
    if keras is not None and isinstance(model, keras.Layer) and keras.backend.backend() != "tensorflow":
        raise refuse(
            f"this Keras model runs on the {keras.backend.backend()!r} Keras backend; the "
            "TensorFlow backend captures Keras models only when keras.backend.backend() is "
            "'tensorflow'",
            "tf_keras_backend_mismatch",
            "set KERAS_BACKEND=tensorflow before importing keras, or trace with the backend "
            "of the framework Keras runs on",
        )


def root(model: Any) -> None:
    """Refuses, before anything runs: non-eager execution, and a Keras layer not built yet (its
    first call creates variables with random initializers). The adapter has refused a Keras
    model on another Keras backend, and sent a graph-only entry to the FuncGraph importer."""
    if not tf.executing_eagerly():
        raise refuse(
            "TensorFlow is not executing eagerly here (inside a tf.function or with eager "
            "execution disabled); the TensorFlow backend captures eager calls",
            "capability_unsupported",
            "call tl.trace outside tf.function, with eager execution enabled",
        )
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(model, keras.Layer):
        unbuilt = [layer.name for layer in model._flatten_layers() if not layer.built]
        if unbuilt:
            raise refuse(
                f"Keras layers not built yet ({', '.join(unbuilt[:3])}): their first call creates "
                "variables (random initializers, variable writes) inside the capture",
                "tf_keras_unbuildable",
                "call the model once (or model.build(input_shape)) before tracing",
            )
