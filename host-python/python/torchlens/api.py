"""``tl.trace`` and ``tl.load``."""

from __future__ import annotations

from typing import Any, Optional

from .options import CaptureOptions
from .trace import Trace


def trace(
    model: Any,
    x: Any = (),
    *,
    backend: Optional[str] = None,
    save: Any = None,
    capture: Optional[CaptureOptions] = None,
    kwargs: Optional[dict] = None,
    intervene: Any = None,
    stop_after: Any = None,
    facets: Any = None,
) -> Trace:
    """Runs ``model`` on ``x`` and records every operation.

    ``x`` is one input, or a tuple/list of positional inputs; ``kwargs`` are keyword inputs.
    ``backend=None`` routes the model to its framework. ``save`` chooses which values to keep:
    ``None``/``True`` every op, ``False`` none, or a selector (``tl.func("relu") |
    tl.module("encoder")``).
    """
    from .backends import get_backend, resolve

    options = capture if capture is not None else CaptureOptions()
    spec = resolve(model, x, backend)
    adapter = get_backend(spec.name)
    trace = adapter.capture(model, x, kwargs, save, options, intervene=intervene, stop_after=stop_after)
    trace.facets = facets
    return trace


def record(model: Any, x: Any = (), *, backend: Optional[str] = None, **options: Any) -> Any:
    """Fast repeated recording of chosen ops (``tl.record``). Not built on any backend yet:
    routes ``model`` like :func:`trace`, then refuses with ``BackendUnsupportedError``
    (``capability_unsupported``) naming the framework, before the model runs."""
    from .backends import gate, resolve

    gate(resolve(model, x, backend), "sparse_recording")
    raise AssertionError("the gate admitted sparse_recording, which no backend implements")


def validate(trace: Trace, outputs: Any = None) -> Any:
    """Replay validation of a trace (see :meth:`Trace.validate_forward_pass`)."""
    return trace.validate_forward_pass(outputs)


def load(path: str, payload_load_hints: Any = None) -> Trace:
    """Opens a ``.tlspec`` file saved by ``trace.save``. ``payload_load_hints``
    (:class:`~torchlens.tlspec_io.PayloadLoadHints`) says how backends materialize payloads,
    for example re-applying a JAX sharding."""
    from .tlspec_io import load as load_file

    return load_file(path, hints=payload_load_hints)
