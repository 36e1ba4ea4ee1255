"""Python's cyclic garbage collector paused while a capture runs.

A capture allocates several small containers per op (argument templates, replay records, event
tuples); every 700 of them start a collection, and collections that reach the older generations
walk every object the process holds (a framework's whole module tree included). Measured on a
202-op torch model, that was a sixth of the capture's time. Reference counting still frees every
object the moment it is unused; only garbage in reference cycles waits, and the collector runs
again as soon as the capture returns (also when it raises). A collector the caller had already
turned off stays off."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disables the cyclic collector for the block; turns it back on after only if it was on.
    Two captures on different threads at once: whichever started first turns it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
