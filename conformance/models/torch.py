"""The standard models in PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from . import BackendModels, grad_options_class, standard_models


def _fixed(model: nn.Module, seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.from_numpy(rng.standard_normal(tuple(param.shape)).astype("float32") * 0.5))
    return model.eval()


def _input(seed: int, *shape: int) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(4, 12)
        self.out = nn.Linear(4, 4)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
        return self.out(torch.relu(weights @ v))


class Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        return self.block(torch.relu(self.block(x)))


def _build(cls: type, seed: int, shape: tuple) -> Any:
    return lambda: (_fixed(cls(), seed), (_input(seed + 100, *shape),))


def _grad_options(model: Any, args: tuple) -> Any:
    options = grad_options_class("torch")
    # Torch has no GradOptions yet: the request still goes through tl.trace, whose gate answers.
    return object() if options is None else options(input_grad_argnums=(0,))


def _to_array(array: Any) -> Any:
    return torch.from_numpy(np.ascontiguousarray(array))


MODELS = BackendModels(
    models=standard_models(_build, (Mlp, Cnn, Attention, Shared), "relu"),
    to_array=_to_array,
    grad_options=_grad_options,
)
