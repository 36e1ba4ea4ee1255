"""The memory a dropped trace held is reused by the next capture in the same process
(``torchlens/backends/torch/freed_memory.py``): no fresh page for every saved activation after
the first trace, unless ``TORCHLENS_KEEP_FREED_MEMORY=0`` turns the policy off. Each case runs
in a process of its own: the policy is process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
        reason="the policy is glibc's mallopt (Linux with glibc only)",
    ),
]

# Twenty ops of 4 MB each (80 MB held per trace): page faults of the third trace, in pages,
# then of a trace after the kept memory was released.
SECOND_TRACE_FAULTS = r"""
import json, resource, sys, torch
import torchlens as tl
from torchlens.backends.torch import freed_memory

class Steps(torch.nn.Module):
    def forward(self, x):
        for _ in range(20):
            x = x * 1.0001
        return x

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

model, x = Steps(), torch.randn(1 << 20)
expected = tl.trace(model, x)[-1].out.clone()
for _ in range(2):
    trace = tl.trace(model, x)
    del trace
before = faults()
trace = tl.trace(model, x)
kept_faults = faults() - before
same = bool(torch.equal(trace[-1].out, expected))
del trace
released = freed_memory.release_freed_memory()
before = faults()
trace = tl.trace(model, x)
print(json.dumps({
    "faults": kept_faults,
    "faults_after_release": faults() - before,
    "released": released,
    "held_pages": 20 * (4 << 20) // 4096,
    "in_force": freed_memory.keep_freed_memory(),
    "same_values": same and bool(torch.equal(trace[-1].out, expected)),
}))
"""


def run_traces(**environment: str) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", SECOND_TRACE_FAULTS],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **environment},
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_a_trace_after_a_dropped_one_reuses_its_pages():
    kept = run_traces()
    assert kept["in_force"] and kept["same_values"]
    # Without the policy every held page is fresh (the off case below checks that premise).
    assert kept["faults"] < kept["held_pages"] // 4, kept


def test_the_environment_switch_leaves_the_allocator_as_it_is():
    fresh = run_traces(TORCHLENS_KEEP_FREED_MEMORY="0")
    assert not fresh["in_force"] and fresh["same_values"]
    assert fresh["faults"] >= fresh["held_pages"] // 2, fresh


def test_release_hands_the_kept_memory_back():
    kept = run_traces()
    assert kept["released"] and kept["same_values"]
    assert kept["faults_after_release"] >= kept["held_pages"] // 2, kept


def test_a_dropped_trace_frees_its_values_without_a_cyclic_collection():
    import gc
    import weakref

    import torch

    import torchlens as tl

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    seen = []
    # The model's own output object: a trace that saves every value keeps it as the payload.
    model[1].register_forward_hook(lambda module, args, output: seen.append(weakref.ref(output)))
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.no_grad():  # no gradient: the payload is the object itself, not a detached alias
            trace = tl.trace(model, torch.randn(4, 8))
        assert seen[-1]() is not None
        del trace
        assert seen[-1]() is None
    finally:
        if was_enabled:
            gc.enable()
