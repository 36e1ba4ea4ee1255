"""The package's entry points: ``tl.trace``, ``tl.record``, ``tl.validate`` and ``tl.load``. This is
the door: routing, the capability gate, option checks and selector classification happen here,
once, and the adapter receives one checked :class:`~torchlens.adapter_kit.CaptureRequest`."""

from __future__ import annotations

import threading
from typing import Any, Optional

from . import tlspec_io
from ._core import core
from .adapter_kit import CaptureRequest, SaveRequest
from .argument_checks import (
    backend_name,
    flag,
    instance_of,
    keyword_inputs,
    model_argument,
    optional_instance_of,
    path_argument,
)
from .backends import gate, get_backend, resolve
from .collector_pause import collector_paused
from .edits.rules import StopRule, interventions_of
from .errors import (
    BackendUnsupportedError,
    FileAccessError,
    NestedTraceError,
    SelectorError,
    UnsupportedError,
)
from .file_errors import file_error
from .options import CaptureOptions, StreamingOptions
from .selectors import as_selector
from .tlspec_io import PayloadLoadHints
from .trace import Trace

#: Per thread: whether a ``tl.trace`` is running on it. Captures on different threads are
#: independent; a capture inside a traced forward on the same thread would stack a second set
#: of hooks and modes on the first, so it is refused.
_ACTIVE = threading.local()


def trace(
    model: Any,
    x: Any = (),
    kwargs: Optional[dict] = None,
    *,
    backend: Optional[str] = None,
    save: Any = None,
    capture: Optional[CaptureOptions] = None,
    intervene: Any = None,
    stop_after: Any = None,
    facets: Any = None,
    save_grads: Any = None,
    streaming: Optional[StreamingOptions] = None,
) -> Trace:
    """Runs ``model`` on ``x`` and records every operation.

    ``x`` is one input, or a tuple/list of positional inputs; ``kwargs`` (third, as in the
    reference) are keyword inputs. ``backend=None`` routes the model to its framework. ``save``
    chooses which values to keep: ``None``/``True`` every op, ``False`` none, or a selector
    (``tl.func("relu") | tl.module("encoder")``). ``intervene=tl.when(...)`` edits values during
    the run and ``stop_after=selector`` ends it early, where the backend supports them.
    ``save_grads=True`` (or a selector) arms true backward capture where the backend has it
    (torch): after the user's own ``loss.backward()`` on ``trace.output``, each selected op has
    ``op.grad``; the same as ``CaptureOptions(save_grads=...)``.
    ``streaming=StreamingOptions(path="run.tlspec")`` writes the saved values to that file while
    the forward runs, so memory stays near one op's values (the returned trace reads them back
    from the file).
    """
    if getattr(_ACTIVE, "tracing", False):
        raise NestedTraceError(
            "tl.trace was called inside a forward that tl.trace is already recording on this thread",
            "trace_nested",
            "trace the inner model on its own (outside the traced forward), or from another thread",
        )
    model_argument(model)
    backend_name(backend)
    spec = resolve(model, x, backend)
    request = capture_request(
        spec, model, x, kwargs, save, capture, intervene, stop_after, facets, save_grads, streaming
    )
    _ACTIVE.tracing = True
    try:
        with collector_paused():
            return get_backend(spec.name).capture(request)
    finally:
        _ACTIVE.tracing = False


def capture_request(
    spec: Any,
    model: Any,
    x: Any,
    kwargs: Optional[dict],
    save: Any,
    capture: Optional[CaptureOptions],
    intervene: Any,
    stop_after: Any,
    facets: Any,
    save_grads: Any = None,
    streaming: Optional[StreamingOptions] = None,
) -> Any:
    """Gates and checks a capture before anything runs, and builds the adapter's request:
    ``intervene=``, ``stop_after=``, gradients, streaming and ``save_grads=`` against the
    capability table; option values against the ones the backend implements; the ``save=``
    selector's class (value-dependent or temporal selectors need their capability)."""
    options = optional_instance_of(
        capture,
        CaptureOptions,
        "capture",
        "a tl.CaptureOptions",
        "pass capture=tl.CaptureOptions(recurrence_detection=False), or leave it unset",
    )
    options = options if options is not None else CaptureOptions()
    kwargs = keyword_inputs(kwargs)
    # The gate comes before the arguments are read: a backend that cannot edit says so first.
    if intervene is not None:
        gate(spec, "intervene")
    if stop_after is not None:
        gate(spec, "stop_after")
    interventions = interventions_of(intervene)
    stop_rule = StopRule.from_argument(stop_after)
    if options.grad_options is not None:
        gate(spec, "derived_grads")
    if streaming is not None:
        gate(spec, "streaming")
        if not isinstance(streaming, StreamingOptions):
            raise UnsupportedError(
                f"streaming= takes a StreamingOptions, not {type(streaming).__name__}",
                "streaming_path_invalid",
                'pass streaming=tl.StreamingOptions(path="run.tlspec")',
            )
    if save_grads is None:
        save_grads = options.save_grads if options.save_grads is not None else options.extra.get("save_grads")
    if save_grads is not None and save_grads is not False:
        gate(spec, "save_grads")
        if save_grads is not True:
            save_grads = as_selector(save_grads)
    if options.backward_ready or options.extra.get("backward_ready"):
        gate(spec, "backward_ready")
    for option, accepted in spec.option_values.items():
        value = getattr(options, option)
        if value is not None and value not in accepted:
            raise BackendUnsupportedError(
                f"{option}={value!r} is not implemented by the {spec.name} backend",
                "option_unsupported",
                f"use one of {', '.join(repr(item) for item in accepted)}, or leave it unset",
                framework=spec.name,
            )
    selector = None
    if not (save is None or save is True or save is False):
        selector = as_selector(save)
        selector_class = core().classify_selector(selector.arena())
        if selector_class == "value-dependent":
            gate(spec, "save_value_dependent")
        elif selector_class == "temporal":
            gate(spec, "temporal_selectors")
    args = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    return CaptureRequest(
        spec=spec,
        model=model,
        args=args,
        kwargs=kwargs,
        options=options,
        save=SaveRequest.from_argument(save, selector),
        interventions=interventions,
        stop_after=stop_rule,
        facets=facets,
        save_grads=None if save_grads is False else save_grads,
        streaming=streaming,
    )


def record(
    model: Any,
    x: Any = (),
    kwargs: Optional[dict] = None,
    *,
    save: Any = None,
    backend: Optional[str] = None,
    return_output: bool = False,
) -> Any:
    """Fast repeated recording (``tl.record``): runs ``model`` on ``x`` and returns a
    :class:`~torchlens.recording.Recording` holding only the values of the ops ``save`` selects
    (by the labels ``tl.trace`` gives them), the model's output and each value's function,
    module call, shape and dtype. ``return_output=True`` returns ``(output, recording)``.

    The first call for a model and an input signature runs one full trace and learns where the
    selected ops are; later calls with the same model, input shapes, dtypes and structure, and
    ``save=``, take them directly, without building a trace. Routes like :func:`trace`; a backend
    that does not implement it refuses with ``BackendUnsupportedError``
    (``capability_unsupported``) before the model runs. ``save`` must be a selector (or a
    label): recording everything is what :func:`trace` does.
    """
    model_argument(model)
    backend_name(backend)
    flag(return_output, "return_output")
    kwargs = keyword_inputs(kwargs)
    spec = resolve(model, x, backend)
    gate(spec, "sparse_recording")
    if save is None or isinstance(save, bool):
        raise SelectorError(
            f"tl.record needs save= to choose the ops to record, got {save!r}",
            "record_selector_missing",
            'pass a selector, e.g. save=tl.module("layer3"), or use tl.trace to keep every op',
        )
    args = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    # The backend's bound implementation: (model, positional inputs, keyword inputs, selector).
    implementation = spec.capability_implementations["sparse_recording"]
    with collector_paused():
        recording = implementation(model, args, kwargs, as_selector(save))
    return (recording.output, recording) if return_output else recording


def validate(trace: Trace, outputs: Any = None) -> Any:
    """Replay validation of a trace (see :meth:`Trace.validate_forward_pass`)."""
    instance_of(trace, Trace, "trace", "a tl.Trace", "pass the trace tl.trace or tl.load returned")
    return trace.validate_forward_pass(outputs)


def load(
    path: str,
    payload_load_hints: Any = None,
    verify: bool = False,
    backend: Optional[str] = None,
    untrusted: bool = False,
    in_memory: Optional[bool] = None,
) -> Trace:
    """Opens a ``.tlspec`` file saved by ``trace.save``. ``payload_load_hints``
    (:class:`~torchlens.tlspec_io.PayloadLoadHints`) says how backends materialize payloads,
    for example re-applying a JAX sharding. A file that names no backend, or one not
    registered here, is refused (``tlspec_backend_missing``, ``backend_unknown``).
    The header and the trace body are always checked against their checksums (format
    version 2); ``verify=True`` also reads every payload and checks its CRC-32.
    ``backend="torch"`` refuses a file that names another backend (``tlspec_backend_mismatch``);
    ``untrusted=True`` reads a file from anyone under the CLI's sandbox limits, into private
    memory; ``in_memory=True`` copies the payloads instead of mapping the file (see
    :func:`torchlens.tlspec_io.load` and docs/security.md). A path that cannot be read is a
    :class:`~torchlens.errors.FileAccessError` naming it (also the matching ``OSError``)."""
    path = path_argument(path, "path", "run.tlspec")
    backend_name(backend)
    flag(verify, "verify")
    flag(untrusted, "untrusted")
    if in_memory is not None:
        flag(in_memory, "in_memory")
    optional_instance_of(
        payload_load_hints,
        PayloadLoadHints,
        "payload_load_hints",
        "a tl.PayloadLoadHints",
        "pass payload_load_hints=tl.PayloadLoadHints(...), or leave it unset",
    )
    try:
        return tlspec_io.load(
            path,
            backend=backend,
            hints=payload_load_hints,
            verify=verify,
            untrusted=untrusted,
            in_memory=in_memory,
        )
    except FileAccessError:
        raise
    except OSError as error:
        raise file_error(error, path, "read") from None
