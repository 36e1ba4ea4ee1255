"""The capture pipeline for a backend that captures by program, written once for both kinds of
program a framework hands over:

* a **walked program** (:mod:`.program_walk`): the call split into its arrays
  (:class:`~.flat_call.FlatCall`), traced once per call signature, walked with module scopes,
  edits of its constants and derived gradients;
* a **graph-only entry** (the framework can only run it as a compiled graph,
  :class:`GraphOnlyCaptureHooks`): its compiled graph (:mod:`.graph_program`) imported op by op
  (:mod:`.graph_import`) with the entry as its function root.

One order for both:

request (already gated by the kit's preflight) → the call split (:meth:`ProgramCaptureHooks.split`)
→ the backend's refusals of the call → the program traced (or compiled) once per call signature
(:mod:`.program_cache`) → the refusal checks of the program (once per cached program and check
key: the program is read, nothing runs) → its constants checked → session opened → root and
modules declared, provenance → the program's arguments declared (parameters, inputs, constants)
→ the program run, the root call bracketed (module scopes for an attributed root) → outputs
named → the backend's provenance facts → runtime → finish (or abort on any error, by the
session) → derived gradients.

A backend supplies a :class:`ProgramCaptureHooks` subclass (a :class:`GraphOnlyCaptureHooks`
for a graph-only entry): how it splits the call, traces and checks the program, and which
:class:`~.program_import.ProgramImport` runs it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Hashable, List, Sequence, Tuple

from . import derived_grads
from .capture_pipeline import CallRuntime
from .module_scopes import ModuleScopes
from .program_cache import Entry
from .program_import import Pair, Program, ProgramImport
from .replay import ReplayRuntime
from .request import CaptureRequest
from .session import CaptureSession

if TYPE_CHECKING:  # only named in signatures
    from ..trace import Trace
    from .protocol import BackendProtocol


@dataclass
class ProgramRuntime(ReplayRuntime):
    """Runtime-only data of a live trace (never saved): what replay reads, plus the traced call,
    the walk and the output structure derived gradients re-run."""

    root: Any = None
    capture: Any = None
    output_tree: Any = None


class ProgramCaptureHooks:
    """One capture's framework side, made fresh for each capture. The defaults serve a walked
    program (:class:`~.program_walk.ProgramWalk` over a :class:`~.flat_call.FlatCall`)."""

    #: ``provenance.param_source`` of a call with parameters.
    param_source = "derived"

    def __init__(self, adapter: BackendProtocol, request: CaptureRequest) -> None:
        self.adapter, self.request = adapter, request

    # ---- the backend's side -----------------------------------------------------------------

    def split(self) -> Any:
        """The request's call split into its arrays (a :class:`~.flat_call.FlatCall` for a
        walked program), refusing a root the backend cannot take."""
        raise NotImplementedError

    def check(self, root: Any) -> None:
        """The backend's refusals of the call, before it is traced."""

    def lookup(self, root: Any) -> Entry:
        """The program cache's entry for the call (traced on a miss)."""
        raise NotImplementedError

    def program(self, entry: Entry) -> Tuple[Any, Sequence[Any], Any]:
        """The traced program's open body, its constant values and its output structure."""
        raise NotImplementedError

    def check_key(self, root: Any) -> Hashable:
        """What the program's refusal checks depend on besides the program (options, whether
        the root is attributed): a program passes them once per key."""
        return None

    def check_program(self, body: Any, key: Hashable) -> None:
        """Refuses a program the walk cannot serve, before a single equation runs."""

    def check_constants(self, values: Sequence[Any]) -> None:
        """Refuses constants that cannot be recorded."""

    def check_call(self, root: Any, body: Any) -> None:
        """Refuses a call whose arrays do not line up with the program's arguments."""

    def make_walk(self, session: CaptureSession, entry: Entry) -> ProgramImport:
        """The import (a :class:`~.program_walk.ProgramWalk` for a walked program) that runs
        the program of ``entry`` in ``session``."""
        raise NotImplementedError

    def provenance(self, walk: ProgramImport) -> Dict[str, str]:
        """The backend's facts about this capture (``provenance.<name>``), once it ran."""
        return {}

    # ---- the mode's side (a walked program here; graph-only entries override) ----------------

    def declare_root(self, session: CaptureSession, root: Any) -> None:
        """Provenance of the root and its modules (module 0 is declared by the pipeline)."""
        session.extra("provenance.param_source", self.param_source if root.params else "none")
        session.extra("provenance.module_identity_mode", root.kind)
        root.declare_modules(session)

    def arguments(self, walk: Any, root: Any, constants: Sequence[Any]) -> List[Pair]:
        """The program's arguments, declared: parameters, then inputs; its constants (declared
        after them, in order) are the walk's :attr:`constants`."""
        pairs = []
        for name, value in root.params:
            value = walk.as_value(value)
            pairs.append(walk.param(name, root.param_module(name), value, root.param_trainable(name)))
        for name, value in root.inputs:
            pairs.append(walk.input(name, walk.as_value(value)))
        self.constants = [walk.constant(value) for value in constants]
        return pairs

    def run(self, session: CaptureSession, walk: Any, root: Any, body: Any, args: List[Pair]) -> List[Pair]:
        """The program run on ``args`` inside the root call (entered by the pipeline), module
        scopes read for an attributed root; the root call exited with its outputs."""
        if root.scope_names is not None:
            walk.scopes = ModuleScopes(session, walk, root.scope_names)
        outs = walk.run(body, self.constants, args, top=True)
        session.exit(0, [value_id for _, value_id in outs if value_id is not None])
        return outs

    def output_names(self, root: Any, output_tree: Any, count: int) -> List[str]:
        """The recorded name of each output: ``output`` and the output leaf's path in the output
        structure (flattened as the call's arguments are)."""
        names = []
        for path, _ in root.flatten(output_tree)[0]:
            suffix = root.path_name(path)
            names.append("output" + ("." + suffix if suffix else ""))
        return names

    def runtime(self, root: Any, walk: Any, output_tree: Any) -> ReplayRuntime:
        """The live trace's runtime: the traced call, the walk and the output structure."""
        adapter = self.adapter
        return ProgramRuntime(
            records=walk.records,
            reference=lambda: adapter.output_leaves(root.flat(*root.dynamic)),
            params=walk.params,
            param_dtypes=walk.param_dtypes,
            values=walk.values,
            root=root,
            capture=walk,
            output_tree=output_tree,
        )

    def finished(self, trace: Trace) -> None:
        """The trace once the session finished it."""


def run_program_capture(
    adapter: BackendProtocol, request: CaptureRequest, hooks: ProgramCaptureHooks
) -> Trace:
    """One capture by program (the module docstring gives the order)."""
    request = hooks.request
    root = hooks.split()
    hooks.check(root)
    # Refusals come before the capture starts: the program is read, no equation runs.
    entry = hooks.lookup(root)
    body, constants, output_tree = hooks.program(entry)
    key = hooks.check_key(root)
    if key not in entry.checked:
        hooks.check_program(body, key)
        entry.checked.add(key)
    hooks.check_constants(constants)
    hooks.check_call(root, body)
    with CaptureSession(request) as session:
        walk = hooks.make_walk(session, entry)
        session.module(0, ["self"], root.class_name or "function", False, False)
        hooks.declare_root(session, root)
        args = hooks.arguments(walk, root, constants)
        session.enter(0)
        outs = hooks.run(session, walk, root, body, args)
        for name, pair in zip(hooks.output_names(root, output_tree, len(outs)), outs):
            walk.output(name, pair)
        for fact, value in hooks.provenance(walk).items():
            session.extra(f"provenance.{fact}", value)
        trace = session.finish(adapter, runtime=hooks.runtime(root, walk, output_tree))
    hooks.finished(trace)
    grad_options = request.options.grad_options
    if grad_options is not None:
        trace.autograd = derived_grads.derive(adapter.make_grad_hooks(trace, grad_options))
    return trace


# ---- graph-only entries ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GraphOnlyRefusals:
    """The backend's refusal codes for what a graph-only entry cannot do, and the remedies."""

    intervene_code: str
    intervene_remedy: str
    grad_code: str
    grad_remedy: str
    #: What to do when the compiled graph's arguments do not line up with the call's arrays.
    inputs_remedy: str = "pass the entry's inputs as array arguments"


def check_graph_only(adapter: BackendProtocol, request: CaptureRequest, refusals: GraphOnlyRefusals) -> None:
    """Refuses, before anything runs, what a graph-only entry cannot do: edit values
    (``intervene=``, ``stop_after=``: the frozen graph runs as it is), derive gradients (they
    need an eager rerun of the call) or attribute ops to modules (a graph has none)."""
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


@dataclass
class GraphEntryCall:
    """The call of a graph-only entry: the model (the entry as the user passed it), the traced
    ``function`` it runs, its array ``inputs`` (``inputs.<n>``), then the values the compiled
    graph captured (``(value, kept)``: a constant when the trace keeps it, else handed over as a
    literal, such as a handle to a variable)."""

    model: Any
    function: Any
    inputs: List[Any]
    captures: List[Tuple[Any, bool]]

    @property
    def class_name(self) -> str:
        """The root's name: the entry's ``__name__``, else its type's."""
        return str(getattr(self.model, "__name__", type(self.model).__name__))


class GraphOnlyCaptureHooks(ProgramCaptureHooks):
    """The graph-only mode of the pipeline: the entry is the function root (module 0, owning
    nothing: its call is entered and exited before the graph runs), graph node names are
    one-shot sites (``recurrence_detection`` off), the program's arguments are the call's inputs
    and the graph's captures, the outputs are ``output`` (or ``output.<n>`` for several).
    :meth:`program` gives the compiled :class:`~.program_import.Program` of the entry's graph
    (:func:`~.graph_program.compile_graph`), run by :meth:`~.program_import.ProgramImport.run_program`."""

    #: What the backend refuses of a graph-only entry, with its codes.
    graph_only_refusals: GraphOnlyRefusals

    def __init__(self, adapter: BackendProtocol, request: CaptureRequest) -> None:
        options = dataclasses.replace(request.options, recurrence_detection=False)
        super().__init__(adapter, dataclasses.replace(request, options=options))

    def program(self, entry: Entry) -> Tuple[Program, Sequence[Any], Any]:
        return entry.traced, (), None

    def check_program(self, body: Any, key: Hashable) -> None:
        """Refuses a graph that writes state or draws random numbers (read, not run)."""

    def declare_root(self, session: CaptureSession, root: Any) -> None:
        session.extra("provenance.module_identity_mode", "function_root")

    def arguments(self, walk: Any, root: Any, constants: Sequence[Any]) -> List[Pair]:
        pairs = [walk.input(f"inputs.{index}", value) for index, value in enumerate(root.inputs)]
        return pairs + [walk.constant(value) if kept else (value, None) for value, kept in root.captures]

    def check_call(self, root: Any, body: Program) -> None:
        if len(body.in_slots) != len(root.inputs) + len(root.captures):
            raise self.adapter.refuse(
                "the graph-only entry's inputs do not line up with the call's array arguments",
                "capability_unsupported",
                self.graph_only_refusals.inputs_remedy,
            )

    def run(self, session: CaptureSession, walk: Any, root: Any, body: Any, args: List[Pair]) -> List[Pair]:
        session.exit(0, [], [])
        return walk.run_program(body, [], args)

    def output_names(self, root: Any, output_tree: Any, count: int) -> List[str]:
        return ["output" if count == 1 else f"output.{index}" for index in range(count)]

    def runtime(self, root: Any, walk: Any, output_tree: Any) -> ReplayRuntime:
        request = self.request
        return CallRuntime(
            records=walk.records,
            reference=self.adapter.reference_of(request),
            params=walk.params,
            param_dtypes=walk.param_dtypes,
            values=walk.values,
            model=request.model,
            args=request.args,
            kwargs=request.kwargs,
            unresolved=walk.unresolved,
        )

    def finished(self, trace: Trace) -> None:
        trace.options = dataclasses.replace(self.request.options, module_identity_mode="function_root")
