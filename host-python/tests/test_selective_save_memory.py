"""Selective save on torch is single pass: values the plan does not select are dropped while the
forward runs, so peak memory falls with a narrower ``save=``. Measured as the growth of the
process's peak resident memory (VmHWM: ``getrusage`` would report the parent's peak, which Linux
carries across exec), each capture in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch

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
    trace = tl.trace(model, x, save={save})
    after = peak_bytes()
print(len(trace.saved_ops), after - before)
"""


def peak_growth(save: str) -> tuple:
    output = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(save=save)], check=True, capture_output=True, text=True
    ).stdout.split()
    return int(output[0]), int(output[1])


def test_a_narrow_save_lowers_peak_memory():
    saved_all, growth_all = peak_growth("None")
    saved_one, growth_one = peak_growth('tl.label("relu_1_3:2")')
    assert saved_all > 800
    assert saved_one == 1
    # 800 activations of 256 KiB kept in full (~200 MiB) against a window of recent ones.
    assert growth_all > 150 * 2**20, growth_all
    assert growth_one < growth_all / 4, (growth_one, growth_all)
