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

# resnet18 at batch 8 holds ~256 MB of activations per trace, the largest ~26 MB each: sizes at
# which glibc's own thresholds hand a dropped trace's memory back (a small model's values stay
# in the heap either way). Trace, read an op, drop; then the most page faults of four more such
# traces, and those of one after the kept memory was released.
SECOND_TRACE_FAULTS = r"""
import json, resource, sys, torch, torchvision
import torchlens as tl
from torchlens.backends.torch import freed_memory

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

# Every mallopt call the policy makes goes through here (the C library object is cached).
settings = []
library = freed_memory._glibc()
if library is not None:
    real_mallopt = library.mallopt

    def recording_mallopt(parameter, value):
        settings.append((parameter, value))
        return real_mallopt(parameter, value)

    library.mallopt = recording_mallopt

torch.manual_seed(0)
model, x = torchvision.models.resnet18(weights=None).eval(), torch.randn(8, 3, 224, 224)

def traced_faults():
    before = faults()
    trace = tl.trace(model, x)
    count = faults() - before
    same = bool(torch.equal(trace[-1].out, expected))
    del trace
    return count, same

with torch.no_grad():
    expected = model(x)
    traced_faults()
    # The most any of four later traces faulted in: without the policy, glibc's own thresholds
    # hand back a varying part of the dropped trace's memory, not the same part every time.
    later = [traced_faults() for _ in range(4)]
    kept_faults, same = max(count for count, _ in later), all(equal for _, equal in later)
    released = freed_memory.release_freed_memory()
    released_faults, same_again = traced_faults()
print(json.dumps({
    "faults": kept_faults,
    "faults_after_release": released_faults,
    "released": released,
    "held_pages": 256 * 1024 * 1024 // 4096,
    "in_force": freed_memory.keep_freed_memory(),
    "allocator_settings": len(settings),
    "same_values": same and same_again,
}))
"""


def _huge_pages_for_every_mapping() -> bool:
    """With transparent huge pages on for every mapping, a fault brings in 2 MB, not 4 KB: fault
    counts then say nothing about fresh pages."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as setting:
            return "[always]" in setting.read()
    except OSError:
        return False


counts_pages = pytest.mark.skipif(
    _huge_pages_for_every_mapping() or bool(os.environ.get("THP_MEM_ALLOC_ENABLE")),
    reason="transparent huge pages back every mapping: page-fault counts do not count 4 KB pages",
)


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


@pytest.fixture(scope="module")
def kept_run() -> dict:
    return run_traces()


@counts_pages
def test_a_trace_after_a_dropped_one_reuses_its_pages(kept_run):
    assert kept_run["in_force"] and kept_run["same_values"]
    assert kept_run["allocator_settings"] == 2  # the mmap and trim thresholds
    # Without the policy a good part of the held pages is fresh (the off case below checks that).
    assert kept_run["faults"] < kept_run["held_pages"] // 20, kept_run


@counts_pages
def test_the_environment_switch_leaves_the_allocator_as_it_is():
    """With the switch off no allocator setting is made. (How many pages glibc's own thresholds
    then hand back varies from run to run, 0 to 61,657 faults on resnet18 b8 in eight runs here,
    so the fault count is not what this checks.)"""
    fresh = run_traces(TORCHLENS_KEEP_FREED_MEMORY="0")
    assert not fresh["in_force"] and fresh["same_values"]
    assert fresh["allocator_settings"] == 0, fresh


@counts_pages
def test_release_hands_the_kept_memory_back(kept_run):
    assert kept_run["released"]
    assert kept_run["faults_after_release"] >= kept_run["held_pages"] // 8, kept_run


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
