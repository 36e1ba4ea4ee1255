"""The PyTorch models: the conformance suite's four standard models (:data:`MODELS`) and the
battery of small models the torch tests and benchmarks trace (:func:`battery`)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
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
    """Two linear layers around a ReLU module. The standard model is ``Mlp(3, 4, 2)``; the
    battery's (the defaults) is wider; ``out`` (a module class) adds an output activation
    module, which the backward tests need as one more leaf with a gradient."""

    def __init__(
        self, features: int = 8, hidden: int = 16, classes: int = 4, out: type[nn.Module] | None = None
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, classes)
        if out is not None:
            self.out = out()

    def forward(self, x):
        y = self.fc2(self.act(self.fc1(x)))
        return self.out(y) if hasattr(self, "out") else y


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
    """One linear layer (``block``) called twice. The standard model is the default: a functional
    ReLU between the calls. ``act`` (a module class) puts an activation module there instead;
    ``classes`` adds that activation again and a ``head`` after the second call."""

    def __init__(
        self, features: int = 4, act: type[nn.Module] | None = None, classes: int | None = None
    ) -> None:
        super().__init__()
        self.block = nn.Linear(features, features)
        if act is not None:
            self.act = act()
        if classes is not None:
            self.head = nn.Linear(features, classes)

    def forward(self, x):
        act = self.act if hasattr(self, "act") else torch.relu
        x = self.block(act(self.block(x)))
        return self.head(act(x)) if hasattr(self, "head") else x


class ProjectedAttention(nn.Module):
    """Self-attention with separate query, key and value layers, a softmax module and an output
    projection; by default a residual add and a LayerNorm close it."""

    def __init__(self, dim: int = 8, residual_norm: bool = True) -> None:
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)
        self.proj = nn.Linear(dim, dim)
        if residual_norm:
            self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(-2, -1) / math.sqrt(x.shape[-1])
        attended = self.proj(self.softmax(scores) @ self.v(x))
        return self.norm(x + attended) if hasattr(self, "norm") else attended


class PooledCnn(nn.Module):
    """Two convolutions with ReLU modules, a max pool and a flattened linear head: every step a
    leaf module (the backward tests compare one gradient per leaf module call)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.act1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.act2 = nn.ReLU()
        self.flat = nn.Flatten()
        self.head = nn.Linear(6 * 2 * 2, 3)

    def forward(self, x):
        x = self.pool(self.act1(self.conv1(x)))
        return self.head(self.flat(self.act2(self.conv2(x))))


class Recurrent(nn.Module):
    """An LSTM read at its last step, then a linear head; ``add_final_hidden`` adds the final
    hidden state to that last output first."""

    def __init__(
        self, features: int = 5, hidden: int = 7, classes: int = 3, add_final_hidden: bool = False
    ) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)
        self.add_final_hidden = add_final_hidden

    def forward(self, x):
        sequence, (hidden, _cell) = self.lstm(x)
        last = sequence[:, -1] + hidden[-1] if self.add_final_hidden else sequence[:, -1]
        return self.head(last)


def _build(cls: type, seed: int, shape: tuple) -> Any:
    return lambda: (_fixed(cls(), seed), (_input(seed + 100, *shape),))


def _grad_options(model: Any, args: tuple) -> Any:
    options = grad_options_class("torch")
    # Torch has no GradOptions yet: the request still goes through tl.trace, whose gate answers.
    return object() if options is None else options(input_grad_argnums=(0,))


def _to_array(array: Any) -> Any:
    return torch.from_numpy(np.ascontiguousarray(array))


MODELS = BackendModels(
    models=standard_models(_build, (partial(Mlp, 3, 4, 2), Cnn, Attention, Shared), "relu"),
    to_array=_to_array,
    grad_options=_grad_options,
)


# The battery: the small models the torch tests trace, beyond the standard four.


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = x.mean(dim=(2, 3))
        return self.head(x)


class Loop(nn.Module):
    """One module called five times: five passes of one layer."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(6, 6)

    def forward(self, x):
        for _ in range(5):
            x = torch.tanh(self.cell(x))
        return x


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        normed = self.norm1(x)
        attended, _ = self.attention(normed, normed, normed, need_weights=False)
        x = x + attended
        return x + self.mlp(self.norm2(x))


class SharedModule(nn.Module):
    """One Linear reachable under two names and called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(5, 5)
        self.second = self.first
        self.blocks = nn.ModuleList([nn.Linear(5, 5), nn.Linear(5, 5)])

    def forward(self, x):
        x = self.second(self.first(x))
        for block in self.blocks:
            x = block(x)
        return x


GLOBAL_OFFSET = torch.arange(4, dtype=torch.float32)


class Residual(nn.Module):
    """A skip connection around two convolutions; ``relu`` is one module called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.relu(x + self.conv2(self.relu(self.conv1(x))))


class ReadsGlobal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + GLOBAL_OFFSET


class InPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        y.add_(1.0)
        y.relu_()
        y *= 2
        return y


class DictModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image = nn.Linear(4, 3)
        self.text = nn.Linear(2, 3)

    def forward(self, batch):
        image = self.image(batch["image"])
        text = self.text(batch["text"])
        return {"joint": image * text, "image": image}


class Raises(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        x = self.fc(x)
        raise RuntimeError("boom inside forward")


def battery():
    """(name, model, input) for every model of the battery, deterministic weights."""
    torch.manual_seed(0)
    import torchvision

    return [
        ("mlp", Mlp().eval(), torch.randn(2, 8)),
        ("cnn_batchnorm", SmallCnn().eval(), torch.randn(2, 3, 8, 8)),
        ("resnet18", torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64)),
        ("loop", Loop().eval(), torch.randn(3, 6)),
        ("transformer_block", TransformerBlock().eval(), torch.randn(2, 5, 16)),
        ("shared_module", SharedModule().eval(), torch.randn(2, 5)),
        ("reads_global", ReadsGlobal().eval(), torch.randn(2, 4)),
        ("in_place", InPlace().eval(), torch.randn(2, 4)),
    ]
