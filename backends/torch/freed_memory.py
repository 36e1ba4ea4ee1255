"""Keeps the memory of a dropped trace in the process, so the next capture reuses it.

A trace that saves every value holds all of the forward's activations until it is dropped
(resnet18 at batch 8: 256 MB). glibc's malloc hands freed memory at the top of its heap back to
the kernel once more than a threshold (dynamic, at most 64 MB) is free there, and serves blocks
above 32 MB (less before the threshold has adapted) with a fresh ``mmap`` each. So every trace
after the first received fresh pages: a page fault and a zeroed page for every 4 KB of saved
activation, about a third of the forward's own time on that model (measured 65,000 faults,
+90 ms on a 220 ms forward). A plain forward pays it too, for its own temporaries.

At the first torch capture, on Linux with glibc, the allocator is told to keep freed memory for
reuse: blocks up to 32 MB (the most ``M_MMAP_THRESHOLD`` accepts) come from the heap, and free
memory at its top is returned to the kernel only beyond a quarter of physical memory (at most
2 GB). The next trace then writes into pages the process already has, as a caching allocator
(torch's own on GPUs) does. The cost: the process's resident memory stays near its peak after
a trace is dropped, until it allocates again or exits. ``TORCHLENS_KEEP_FREED_MEMORY=0`` in the
environment leaves the allocator as it is; ``release_freed_memory()`` hands what is free back to
the kernel now."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from typing import Optional

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

#: The largest ``M_MMAP_THRESHOLD`` glibc accepts on 64-bit systems (HEAP_MAX_SIZE / 2).
MMAP_THRESHOLD_BYTES = 32 << 20

#: Free memory kept at most, whatever the machine's size (``mallopt`` takes a C int).
KEEP_AT_MOST_BYTES = 2**31 - 1

#: The environment variable that turns the policy off (``0``, ``false``, ``no``, ``off``).
ENVIRONMENT_SWITCH = "TORCHLENS_KEEP_FREED_MEMORY"

#: Whether the policy is in force: None until the first capture tried it.
_applied: Optional[bool] = None


@functools.cache
def _glibc() -> Optional[ctypes.CDLL]:
    """The C library when it is glibc (the policy is glibc's ``mallopt``), else None. Looked up
    once: ``find_library`` runs a subprocess where the answer is not cached by the system."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        library = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        library.gnu_get_libc_version  # noqa: B018 - present in glibc only (not musl)
        library.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return library


def _switched_off() -> bool:
    return os.environ.get(ENVIRONMENT_SWITCH, "1").strip().lower() in ("0", "false", "no", "off")


def keep_freed_memory() -> bool:
    """Applies the policy once per process (later calls do nothing); returns whether it is in
    force."""
    global _applied
    if _applied is not None:
        return _applied
    if _switched_off():
        return False
    library = _glibc()
    if library is None:
        _applied = False
        return False
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        physical = KEEP_AT_MOST_BYTES * 4
    keep = min(KEEP_AT_MOST_BYTES, max(physical // 4, MMAP_THRESHOLD_BYTES))
    # Setting the trim threshold ends glibc's own adaptation of both thresholds: set both.
    library.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    applied = library.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    applied = library.mallopt(_M_TRIM_THRESHOLD, keep) == 1 and applied
    _applied = applied
    return applied


def release_freed_memory() -> bool:
    """Returns the free memory the allocator keeps to the kernel now (``malloc_trim``); False
    where the C library is not glibc."""
    library = _glibc()
    if library is None:
        return False
    library.malloc_trim.argtypes = (ctypes.c_size_t,)
    library.malloc_trim(0)
    return True
