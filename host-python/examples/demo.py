"""The TorchLens demo: trace a small built-in model, print what ran, save the trace as one
``.tlspec`` file, reload it, and draw the graph.

    python host-python/examples/demo.py OUT_DIR
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchlens as tl


class DemoNet(nn.Module):
    """A small CNN with batchnorm and a recurrent refinement cell called three times."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.cell = nn.Linear(8, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        features = F.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        for _ in range(3):
            features = torch.tanh(self.cell(features)) + features
        return self.head(features).softmax(dim=-1)


def main(out_dir: str) -> int:
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = DemoNet().eval()
    x = torch.randn(2, 3, 16, 16)

    print(f"TorchLens {tl.versions()}")
    trace = tl.trace(model, x)
    print(trace.summary())

    path = os.path.join(out_dir, "demo.tlspec")
    trace.save(path)
    print(f"saved {path} ({os.path.getsize(path)} bytes, {len(trace.saved_ops)} saved values)")

    loaded = tl.load(path)
    identical = loaded.summary() == trace.summary() and all(
        (before.out is None and after.out is None) or torch.equal(before.out, after.out)
        for before, after in zip(trace.ops, loaded.ops)
    )
    print(f"reloaded: {len(loaded)} ops, identical to the live trace: {identical}")

    relu = trace.select(tl.func("relu"))[0]
    mean = relu.out.mean().item()
    print(f"{relu.label}: {relu.func_name} in {relu.module}, mean {mean:.4f}, called from {relu.source}")

    for name, collapsed in (("demo-graph.svg", False), ("demo-overview.svg", True)):
        target = os.path.join(out_dir, name)
        trace.draw(target, collapsed=collapsed)
        print(f"wrote {target}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "out/demo"))
