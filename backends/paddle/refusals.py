"""What a Paddle capture refuses, each with a stable code and a remedy. Root and import checks
run before the model is called; forward-time checks raise from the wrappers the capture
installs, before the refused call does anything (no tensor is written, no random number is
drawn, no value leaves the graph).

The closed set of refusal codes lives in the core (``core-wasm/src/contract/codes.rs``)."""

from __future__ import annotations

import sys
from typing import Any

from torchlens.adapter_kit.refusals import Refusals
from torchlens.errors import BackendUnsupportedError

#: This backend's typed refusals, built by the kit the same way for every backend.
REFUSALS = Refusals("paddle")
refuse, option, value_invalid = REFUSALS.refuse, REFUSALS.option, REFUSALS.value_invalid


def check_import_order() -> None:
    """Paddle crashes (inside Paddle itself) when it is first imported after TensorFlow. The
    backend never triggers that import: a request that would need it refuses first
    (``paddle_import_order``)."""
    if "paddle" not in sys.modules and "tensorflow" in sys.modules:
        raise refuse(
            "Paddle is not imported yet and TensorFlow is: importing Paddle after TensorFlow "
            "crashes inside Paddle, so the Paddle backend will not import it",
            "paddle_import_order",
            "import paddle before tensorflow (at the top of the program), then trace again",
        )


def in_place(what: str) -> BackendUnsupportedError:
    return refuse(
        f"the forward mutates a tensor in place ({what}) while it is captured; replay and the "
        "saved values would see the new value",
        "paddle_in_place_mutation",
        "compute a new tensor instead (y = paddle.nn.functional.relu(x), not x.relu_() or "
        "x[i] = v; paddle.where for masked writes)",
    )


def training_composite(what: str) -> BackendUnsupportedError:
    return refuse(
        f"{what} runs in training mode inside the capture: it updates its running statistics in place",
        "paddle_in_place_mutation",
        "call model.eval() before tracing",
    )


def rng(what: str) -> BackendUnsupportedError:
    return refuse(
        f"the forward draws random numbers ({what}); replay would draw them again",
        "rng_state_in_graph",
        "call model.eval() (dropout in eval mode is deterministic), or draw the random tensor "
        "outside the traced call and pass it in",
    )


def escape(what: str) -> BackendUnsupportedError:
    """A tensor value leaves the graph as a Python scalar, array or branch decision: what is
    computed from it is not attributed to any wrapped op (``paddle_value_escape``)."""
    return refuse(
        f"the forward reads a tensor's value into Python ({what}) while it is captured; what it "
        "computes from that value would not be attributed to the tensor",
        "paddle_value_escape",
        "keep the computation in tensors (paddle.where instead of if, no .item()/.numpy()), or "
        "move the read out of the traced call",
    )


def static_mode() -> BackendUnsupportedError:
    return refuse(
        "Paddle is in static-graph mode; the Paddle backend captures dygraph (eager) only",
        "paddle_static_graph",
        "call paddle.disable_static() before tracing, and trace the dygraph Layer (not a "
        "paddle.jit.to_static function)",
    )


def root(model: Any) -> None:
    """Static-graph mode and a ``paddle.jit.to_static`` root refuse before anything runs
    (dygraph only)."""
    # lazy: this module is imported before Paddle (the package's import-order check lives here)
    import paddle
    from paddle.jit.dy2static.program_translator import StaticFunction

    if not paddle.in_dynamic_mode():
        raise static_mode()
    if isinstance(model, StaticFunction) or isinstance(getattr(model, "forward", None), StaticFunction):
        raise static_mode()
