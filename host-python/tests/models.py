"""The battery of small torch models the tests trace."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


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
