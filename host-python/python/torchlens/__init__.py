"""TorchLens: see inside a neural network while it runs.

``import torchlens as tl``; ``trace = tl.trace(model, x)``; ``print(trace.summary())``.
Importing torchlens imports no framework: each backend imports its framework on first use.
"""

from __future__ import annotations

from . import backends, debug, errors, options, report
from ._core import versions
from .api import load, record, trace, validate
from .edits import (
    RecordContext,
    add,
    clamp,
    grad,
    mean_ablate,
    patch_from,
    replace_with,
    scale,
    when,
    zero_ablate,
)
from .errors import BackendUnsupportedError, TorchLensError
from .extraction import extract_dataset, load_extraction
from .options import CaptureOptions, StreamingOptions
from .recording import Recording
from .selectors import (
    Selector,
    downstream_of,
    followed_by,
    func,
    in_module,
    label,
    label_contains,
    module,
    parse_selector,
    preceded_by,
    upstream_of,
    where,
)
from .tlspec_io import PayloadLoadHints
from .trace import Trace

__version__ = "0.1.0"

__all__ = [
    "BackendUnsupportedError",
    "CaptureOptions",
    "StreamingOptions",
    "add",
    "clamp",
    "grad",
    "mean_ablate",
    "patch_from",
    "RecordContext",
    "replace_with",
    "scale",
    "when",
    "zero_ablate",
    "PayloadLoadHints",
    "Recording",
    "Selector",
    "TorchLensError",
    "Trace",
    "backends",
    "debug",
    "downstream_of",
    "errors",
    "extract_dataset",
    "followed_by",
    "func",
    "in_module",
    "label",
    "label_contains",
    "load",
    "load_extraction",
    "module",
    "options",
    "parse_selector",
    "preceded_by",
    "record",
    "report",
    "trace",
    "upstream_of",
    "validate",
    "versions",
    "where",
]
