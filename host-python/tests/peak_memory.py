"""Peak memory of one torch capture in a fresh interpreter, as the growth of the process's peak
resident memory (VmHWM: ``getrusage`` would report the parent's peak, which Linux carries across
exec). The model is a deep chain whose 800 activations are 256 KiB each (~200 MiB in all)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import torch, torchlens as tl

def peak_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

torch.manual_seed(0)

class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(8))

    def forward(self, x):
        for _ in range(50):
            for layer in self.layers:
                x = torch.relu(layer(x))
        return x

model, x = Deep().eval(), torch.randn(256, 256)  # every activation is 256 KiB
with torch.no_grad():
    model(x)
    before = peak_bytes()
    trace = tl.trace(model, x, {arguments})
    after = peak_bytes()
print(len(trace.saved_ops), after - before)
"""


def peak_growth(arguments: str) -> tuple:
    """(saved ops, peak growth in bytes) of ``tl.trace(model, x, <arguments>)`` on the chain."""
    output = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(arguments=arguments)], check=True, capture_output=True, text=True
    ).stdout.split()
    return int(output[0]), int(output[1])
