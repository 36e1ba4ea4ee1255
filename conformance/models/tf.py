"""The TensorFlow models (Keras 3 layers): the conformance suite's four standard models
(:data:`MODELS`) and the TensorFlow tests' eager battery (:func:`battery`), built with fixed
weights and called once (built) before any trace. Importing this module imports TensorFlow: the
TensorFlow tests import it inside their fixtures (Paddle must be imported first)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from . import BackendModels, grad_options_class, standard_models


def _fixed(model: Any, seed: int, shape: Optional[tuple] = None) -> Any:
    """``model`` with weights drawn from ``seed``, built first on zeros of ``shape`` if given."""
    if shape is not None:
        model(tf.zeros(shape))
    rng = np.random.default_rng(seed)
    model.set_weights([(rng.standard_normal(w.shape) * 0.5).astype(w.dtype) for w in model.get_weights()])
    return model


class Mlp(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = keras.layers.Dense(4)
        self.fc2 = keras.layers.Dense(2)

    def call(self, x):
        return self.fc2(tf.nn.relu(self.fc1(x)))


class Cnn(keras.Model):
    # Keras convolutions are channels-last (NHWC).
    def __init__(self) -> None:
        super().__init__()
        self.conv = keras.layers.Conv2D(3, 3, padding="same")
        self.head = keras.layers.Dense(2)

    def call(self, x):
        return self.head(tf.reduce_mean(tf.nn.relu(self.conv(x)), axis=(1, 2)))


class Attention(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = keras.layers.Dense(12)
        self.out = keras.layers.Dense(4)

    def call(self, x):
        q, k, v = tf.split(self.qkv(x), 3, axis=-1)
        weights = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / 2.0, axis=-1)
        return self.out(tf.nn.relu(tf.matmul(weights, v)))


class Shared(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.block = keras.layers.Dense(4)

    def call(self, x):
        return self.block(tf.nn.relu(self.block(x)))


def _build(cls: type, seed: int, shape: tuple) -> Any:
    def build():
        data = np.random.default_rng(seed + 100).standard_normal(shape).astype("float32")
        return _fixed(cls(), seed, shape), (tf.constant(data),)

    return build


def _grad_options(model: Any, args: tuple) -> Any:
    return grad_options_class("tf")()


MODELS = BackendModels(
    models=standard_models(_build, (Mlp, Cnn, Attention, Shared), "relu", channels_last=True),
    to_array=lambda array: tf.constant(np.ascontiguousarray(array)),
    grad_options=_grad_options,
)


# The battery: the eager models the TensorFlow tests trace.


def mlp() -> Tuple[Any, Any]:
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    return _fixed(model, 0), tf.constant(np.random.default_rng(1).standard_normal((2, 6)).astype("float32"))


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
    model = _fixed(model, 2)
    bn = model.layers[1]
    bn.moving_variance.assign(tf.abs(bn.moving_variance) + 0.5)
    return model, tf.constant(np.random.default_rng(3).standard_normal((2, 8, 8, 2)).astype("float32"))


def rnn() -> Tuple[Any, Any]:
    model = keras.Sequential(
        [keras.Input((5, 3)), keras.layers.LSTM(4, return_sequences=True), keras.layers.GRU(3)]
    )
    return _fixed(model, 4), tf.constant(
        np.random.default_rng(5).standard_normal((2, 5, 3)).astype("float32")
    )


def functional_skip() -> Tuple[Any, Any]:
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(6, activation="tanh", name="inner")(inputs)
    added = keras.layers.Add(name="skip")([inputs, hidden])
    outputs = keras.layers.Dense(2, name="head")(added)
    model = keras.Model(inputs, outputs)
    return _fixed(model, 6), tf.constant(np.random.default_rng(7).standard_normal((3, 6)).astype("float32"))


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
    return _fixed(model, 8), x


class MultiHead(keras.Model):
    """Keras's own multi-head attention layer (the standard model writes attention out)."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)

    def call(self, x: Any) -> Any:
        return self.attention(x, x)


def attention() -> Tuple[Any, Any]:
    model = MultiHead()
    x = tf.constant(np.random.default_rng(11).standard_normal((2, 3, 8)).astype("float32"))
    model(x)
    return _fixed(model, 10), x


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


# The benchmark models: the Keras models benchmarks/tf_overhead.py times, at the sizes
# docs/performance.md publishes.


def benchmark_mlp() -> keras.Model:
    """Eight 128-wide ReLU dense layers, then a 10-way head."""
    return keras.Sequential(
        [keras.layers.Dense(128, activation="relu") for _ in range(8)] + [keras.layers.Dense(10)]
    )


def benchmark_cnn() -> keras.Model:
    """Two convolutions (batch norm, ReLU and a max pool between), pooled, then a 10-way head."""
    return keras.Sequential(
        [
            keras.layers.Conv2D(8, 3, padding="same"),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10),
        ]
    )


def benchmark_attention() -> keras.Model:
    """Two post-norm self-attention blocks (four heads) on (8, 32) sequences, a functional model."""
    inputs = keras.Input((8, 32))
    hidden = inputs
    for _ in range(2):
        hidden = keras.layers.LayerNormalization()(
            hidden + keras.layers.MultiHeadAttention(num_heads=4, key_dim=8)(hidden, hidden)
        )
    return keras.Model(inputs, hidden)
