"""The capture of an entry the framework can only run as a compiled graph (a graph-only entry),
written once: its traced program is imported op by op (:mod:`.program_import`) with the entry
as its function root, and the trace is finished the way every capture is.

What such an entry cannot do is refused here, before anything runs, with the backend's own
codes: edit values (``intervene=``, ``stop_after=``: the frozen graph runs as it is), derive
gradients (they need an eager rerun of the call) or attribute ops to modules (a graph has none).

:mod:`.program_capture` is the other capture by program: a program the backend can walk with
module scopes, edits of its constants and derived gradients. The two share the importer
(:mod:`.program_import`); making this one a mode of that pipeline is the next step."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence, Tuple, Type

from .capture_pipeline import CallRuntime
from .request import CaptureRequest
from .session import CaptureSession

if TYPE_CHECKING:  # only named in signatures
    from ..trace import Trace
    from .program_import import Pair, ProgramImport
    from .protocol import BackendProtocol


@dataclasses.dataclass(frozen=True)
class GraphOnlyRefusals:
    """The backend's refusal codes for what a graph-only entry cannot do, and the remedies."""

    intervene_code: str
    intervene_remedy: str
    grad_code: str
    grad_remedy: str


def check_graph_only(adapter: BackendProtocol, request: CaptureRequest, refusals: GraphOnlyRefusals) -> None:
    """Refuses, before anything runs, what a graph-only entry cannot do."""
    if request.options.grad_options is not None:
        raise adapter.refuse(
            "derived gradients need an eager replay of the call, which cannot run inside a frozen "
            "graph (a compiled function or a saved signature)",
            refusals.grad_code,
            refusals.grad_remedy,
        )
    if request.interventions or request.stop_after is not None:
        raise adapter.refuse(
            "intervene= needs the eager call; a graph-only entry runs as a frozen graph (imported "
            "op by op, which cannot edit values)",
            refusals.intervene_code,
            refusals.intervene_remedy,
        )
    if request.options.module_identity_mode == "object_module":
        raise adapter.refuse(
            "graph-only entries have no module attribution (function_root only)",
            "option_unsupported",
            "leave module_identity_mode unset for a graph-only entry",
        )


def capture_program(
    adapter: BackendProtocol,
    request: CaptureRequest,
    make_import: Callable[[CaptureSession], ProgramImport],
    inputs: Sequence[Any],
    captures: Sequence[Tuple[Any, bool]],
    walk: Callable[[ProgramImport, List[Pair]], List[int]],
    provenance: Callable[[ProgramImport], Dict[str, str]],
    runtime_type: Type[CallRuntime] = CallRuntime,
) -> Trace:
    """One capture of an imported program, the entry its function root (module 0, owning
    nothing). Graph node names are one-shot sites: ``recurrence_detection`` is off.

    The program's arguments are the call's ``inputs`` (``inputs.<n>``), then the values it
    captured (``(value, kept)``: a constant when the trace keeps it, else handed over as a
    literal, such as a handle to a variable). ``walk(importer, arguments)`` imports the program
    on their pairs and returns its outputs' value ids (``output``, or ``output.<n>`` for
    several), and ``provenance(importer)`` gives the backend's facts (``provenance.<name>``)."""
    options = dataclasses.replace(request.options, recurrence_detection=False)
    request = dataclasses.replace(request, options=options)
    model = request.model
    with CaptureSession(request) as session:
        session.module(0, ["self"], str(getattr(model, "__name__", type(model).__name__)), False, False)
        session.extra("provenance.module_identity_mode", "function_root")
        importer = make_import(session)
        arguments = [importer.input(f"inputs.{index}", value) for index, value in enumerate(inputs)]
        arguments += [importer.constant(value) if kept else (value, None) for value, kept in captures]
        session.enter(0)
        session.exit(0, [], [])
        returned = walk(importer, arguments)
        for index, value_id in enumerate(returned):
            session.output("output" if len(returned) == 1 else f"output.{index}", value_id)
        for key, value in provenance(importer).items():
            session.extra(f"provenance.{key}", value)
        runtime = runtime_type(
            records=importer.records,
            reference=adapter.reference_of(request),
            params=importer.params,
            param_dtypes=importer.param_dtypes,
            values=importer.values,
            model=model,
            args=request.args,
            kwargs=request.kwargs,
            unresolved=importer.unresolved,
        )
        trace = session.finish(adapter, runtime=runtime)
    trace.options = dataclasses.replace(options, module_identity_mode="function_root")
    return trace
