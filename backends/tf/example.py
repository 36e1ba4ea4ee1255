"""The TensorFlow backend's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import keras
import numpy as np
import tensorflow as tf


def example() -> Tuple[Any, tuple]:
    """A small Keras MLP (``Sequential(Dense, Dense)``) with fixed weights, built, and its input."""
    model = keras.Sequential([keras.layers.Dense(4, activation="relu"), keras.layers.Dense(2)])
    model.build((None, 3))
    rng = np.random.default_rng(0)
    model.set_weights([rng.standard_normal(w.shape).astype("float32") for w in model.get_weights()])
    return model, (tf.constant(rng.standard_normal((2, 3)).astype("float32")),)
