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


class Counting(nn.Module):
    """Counts its forward calls, to show a refusal came before the model ran."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x)


class SumRows(nn.Module):
    """A ReLU summed to one number: a model whose output is a scalar, whatever the batch."""

    def forward(self, x):
        return torch.relu(x).sum()


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


# The benchmark models: the workloads the torch benchmarks (torch_overhead.py and those that reuse
# its workloads, scale.py, tlspec_cli.py, selective_memory.py) time, at the sizes
# docs/performance.md publishes.


def relu_mlp_stack() -> nn.Module:
    """Eight 256-wide linear layers with ReLUs, then a 10-way head (a Sequential)."""
    layers = []
    for _ in range(8):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(256, 10))


class BenchmarkCnn(nn.Module):
    """Two convolutions with batch norm in a ``features`` Sequential, then a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class Chain(nn.Module):
    """``ops`` small ops, relu and add in turn (1000 by default): per-op cost without the fixed
    cost of a trace; on a 1 MiB activation, one op per MiB saved."""

    def __init__(self, ops: int = 1000) -> None:
        super().__init__()
        self.ops = ops

    def forward(self, x):
        for step in range(self.ops):
            x = torch.relu(x) if step % 2 == 0 else x + 1
        return x


class DeepMlp(nn.Module):
    """Fifty residual layers, four ops each (linear, relu, add, scale): 202 ops with input and
    output, the issue's "deep 50-layer MLP chain"."""

    def __init__(self, layers: int = 50, width: int = 64) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = (x + torch.relu(layer(x))) * 0.5
        return x


class PreNormBlock(nn.Module):
    """A pre-norm transformer block: fused QKV, scaled dot-product attention, a GELU MLP."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Transformer(nn.Module):
    """Six blocks between an embedding and a vocabulary head (82 ops)."""

    def __init__(self, blocks: int = 6, dim: int = 64, vocabulary: int = 1000) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, dim)
        self.blocks = nn.ModuleList(PreNormBlock(dim) for _ in range(blocks))
        self.head = nn.Linear(dim, vocabulary)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class OneOp(nn.Module):
    """One op: its trace minus its forward is what every trace costs before its ops."""

    def forward(self, x):
        return x + 1


class CausalBlock(nn.Module):
    """A pre-norm GPT block: fused QKV split into heads, causal mask, a GELU MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, length, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (dim // self.heads) ** 0.5
        mask = torch.ones(length, length, dtype=torch.bool).tril()
        attention = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        mixed = (attention @ v).transpose(1, 2).reshape(batch, length, dim)
        x = x + self.proj(mixed)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


class Gpt(nn.Module):
    """A small GPT: token and position embeddings, causal blocks, a vocabulary head
    (benchmarks/selective_memory.py)."""

    def __init__(self, vocab=1000, dim=256, heads=4, blocks=4, length=128):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, dim), nn.Embedding(length, dim)
        self.blocks = nn.ModuleList(CausalBlock(dim, heads) for _ in range(blocks))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
