"""What a tinygrad capture refuses, each with a stable code and a remedy. The root checks run
before the model is called; the forward-time checks raise from the wrappers the capture
installs, before the refused call does anything (no buffer is realized or written, no random
number is drawn)."""

from __future__ import annotations

from typing import Any

from tinygrad.engine import jit as tinygrad_jit

from torchlens.adapter_kit.refusals import Refusals
from torchlens.errors import BackendUnsupportedError

#: This backend's typed refusals, built by the kit the same way for every backend.
REFUSALS = Refusals("tinygrad")
refuse, option, value_invalid = REFUSALS.refuse, REFUSALS.option, REFUSALS.value_invalid


def tinyjit_class() -> Any:
    """The class of TinyJit-wrapped functions (``TinyJit`` on 0.13, ``_TinyJit`` on 0.14)."""
    found = getattr(tinygrad_jit, "_TinyJit", None)
    if isinstance(found, type):
        return found
    return tinygrad_jit.TinyJit


def check_root(model: Any) -> None:
    """A TinyJit-wrapped root refuses before it runs: the JIT replays captured kernels, which
    no per-op capture can see."""
    if isinstance(model, tinyjit_class()):
        raise refuse(
            "the model is a TinyJit-wrapped function; its kernels run outside the lazy graph",
            "tinyjit_execution",
            "trace the function the TinyJit wraps (jitted.fxn), not the jitted function",
        )


def realize() -> BackendUnsupportedError:
    return refuse(
        "the forward realizes a tensor (Tensor.realize, .numpy(), .item(), .tolist()) while it is "
        "captured; every value is realized once after the forward returns",
        "tinygrad_mid_capture_realize",
        "return a pure lazy tinygrad expression: move the realize or the read out of the traced call",
    )


def assign(what: str) -> BackendUnsupportedError:
    return refuse(
        f"the forward mutates a tensor ({what}) while it is captured; replay would see the new value",
        "tinygrad_assign",
        "compute a new tensor instead of writing into one (x = x + y, Tensor.where for masked writes)",
    )


def jit() -> BackendUnsupportedError:
    return refuse(
        "a TinyJit-wrapped function runs inside the captured forward; its kernels bypass the lazy graph",
        "tinyjit_execution",
        "call the function the TinyJit wraps (jitted.fxn) inside the traced forward",
    )


def rng() -> BackendUnsupportedError:
    return refuse(
        "the forward draws random numbers (Tensor.rand, randn, dropout in training mode); replay "
        "would draw them again",
        "rng_state_in_graph",
        "draw the random tensor outside the traced call and pass it in, or set Tensor.training = False",
    )
