"""The torch backend's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import torch


def example() -> Tuple[Any, tuple]:
    """A small MLP and its input."""
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    return model.eval(), (torch.randn(2, 3, generator=generator),)
