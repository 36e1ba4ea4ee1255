"""TensorFlow and Keras models of the TensorFlow backend's battery, built with fixed weights and
called once (built) before any trace. Importing this module imports TensorFlow: only the
TensorFlow tests import it, inside their fixtures."""

from __future__ import annotations

from typing import Any, List, Tuple

import keras
import numpy as np
import tensorflow as tf


def _fix(model: Any, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    model.set_weights([(rng.standard_normal(w.shape) * 0.5).astype(w.dtype) for w in model.get_weights()])
    return model


def mlp() -> Tuple[Any, Any]:
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    return _fix(model, 0), tf.constant(np.random.default_rng(1).standard_normal((2, 6)).astype("float32"))


def cnn() -> Tuple[Any, Any]:
    model = keras.Sequential(
        [
            keras.Input((8, 8, 2)),
            keras.layers.Conv2D(4, 3, padding="same"),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(3),
        ]
    )
    model = _fix(model, 2)
    bn = model.layers[1]
    bn.moving_variance.assign(tf.abs(bn.moving_variance) + 0.5)
    return model, tf.constant(np.random.default_rng(3).standard_normal((2, 8, 8, 2)).astype("float32"))


def rnn() -> Tuple[Any, Any]:
    model = keras.Sequential(
        [keras.Input((5, 3)), keras.layers.LSTM(4, return_sequences=True), keras.layers.GRU(3)]
    )
    return _fix(model, 4), tf.constant(np.random.default_rng(5).standard_normal((2, 5, 3)).astype("float32"))


def functional_skip() -> Tuple[Any, Any]:
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(6, activation="tanh", name="inner")(inputs)
    added = keras.layers.Add(name="skip")([inputs, hidden])
    outputs = keras.layers.Dense(2, name="head")(added)
    model = keras.Model(inputs, outputs)
    return _fix(model, 6), tf.constant(np.random.default_rng(7).standard_normal((3, 6)).astype("float32"))


class SharedModel(keras.Model):
    """A subclassed model whose Dense layer is called twice and reachable under two names."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = keras.layers.Dense(4, activation="relu")
        self.alias = self.shared
        self.head = keras.layers.Dense(2)

    def call(self, x: Any) -> Any:
        return self.head(self.shared(self.shared(x)))


def shared() -> Tuple[Any, Any]:
    model = SharedModel()
    x = tf.constant(np.random.default_rng(9).standard_normal((2, 4)).astype("float32"))
    model(x)
    return _fix(model, 8), x


class Attention(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)

    def call(self, x: Any) -> Any:
        return self.attention(x, x)


def attention() -> Tuple[Any, Any]:
    model = Attention()
    x = tf.constant(np.random.default_rng(11).standard_normal((2, 3, 8)).astype("float32"))
    model(x)
    return _fix(model, 10), x


class Affine(tf.Module):
    """A plain ``tf.Module`` with its own variables and a child module."""

    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(12)
        self.w = tf.Variable(rng.standard_normal((4, 3)).astype("float32"), name="w")
        self.b = tf.Variable(rng.standard_normal((3,)).astype("float32"), name="b")

    def __call__(self, x: Any) -> Any:
        return tf.nn.relu(tf.matmul(x, self.w) + self.b)


class TwoAffine(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = Affine()
        self.second = Affine()

    def __call__(self, x: Any) -> Any:
        return self.second(tf.matmul(self.first(x), tf.ones((3, 4))))


def module() -> Tuple[Any, Any]:
    return TwoAffine(), tf.constant(np.random.default_rng(13).standard_normal((2, 4)).astype("float32"))


def closure() -> Tuple[Any, Any]:
    scale = tf.constant(np.arange(4, dtype="float32"))

    def fn(x: Any) -> Any:
        return tf.math.tanh(x * scale) + tf.reduce_sum(x, axis=-1, keepdims=True)

    return fn, tf.constant(np.random.default_rng(14).standard_normal((2, 4)).astype("float32"))


def battery() -> List[Tuple[str, Any, Any]]:
    """``(name, model, input)`` of every eager battery model."""
    return [(name, *build()) for name, build in BUILDERS]


BUILDERS = [
    ("mlp", mlp),
    ("cnn", cnn),
    ("rnn", rnn),
    ("functional_skip", functional_skip),
    ("shared", shared),
    ("attention", attention),
    ("module", module),
    ("closure", closure),
]
