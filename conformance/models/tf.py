"""The standard models in TensorFlow (Keras 3 layers)."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from . import BackendModels, grad_options_class, standard_models


def _fixed(model: keras.Model, seed: int, shape: tuple) -> keras.Model:
    model(tf.zeros(shape))
    rng = np.random.default_rng(seed)
    model.set_weights([rng.standard_normal(w.shape).astype("float32") * 0.5 for w in model.get_weights()])
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
