"""The capture pipeline for a backend that captures by program (:mod:`.program_walk`), written
once:

request (already gated by the kit's preflight) → the call split into its arrays
(:class:`~.flat_call.FlatCall`) → the backend's refusals of the call → the program traced once
per call signature (:mod:`.program_cache`) → the refusal checks of the program (once per cached
program and check key: the program is read, nothing runs) → its constants checked → session
opened → root and modules declared, provenance → parameters, inputs and constants declared →
the program walked, the root call bracketed (module scopes for an attributed root) → outputs
named by their paths → runtime → finish (or abort on any error, by the session) → derived
gradients.

A backend supplies a :class:`ProgramCaptureHooks` subclass: how it splits the call, traces and
checks the program, and which :class:`~.program_walk.ProgramWalk` walks it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Hashable, List, Sequence, Tuple

from . import derived_grads
from .flat_call import FlatCall, Path
from .module_scopes import ModuleScopes
from .program_cache import Entry
from .program_walk import ProgramWalk
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
    """One capture's framework side, made fresh for each capture."""

    #: ``provenance.param_source`` of a call with parameters.
    param_source = "derived"

    def __init__(self, adapter: BackendProtocol, request: CaptureRequest) -> None:
        self.adapter, self.request = adapter, request

    def split(self) -> FlatCall:
        """The request's call split into its arrays (refusing a root the backend cannot take)."""
        raise NotImplementedError

    def check(self, root: FlatCall) -> None:
        """The backend's refusals of the call, before it is traced."""

    def lookup(self, root: FlatCall) -> Entry:
        """The program cache's entry for the call (traced on a miss)."""
        raise NotImplementedError

    def program(self, entry: Entry) -> Tuple[Any, Sequence[Any], Any]:
        """The traced program's open body, its constant values and its output structure."""
        raise NotImplementedError

    def check_key(self, root: FlatCall) -> Hashable:
        """What the program's refusal checks depend on besides the program (options, whether
        the root is attributed): a program passes them once per key."""
        return None

    def check_program(self, body: Any, key: Hashable) -> None:
        """Refuses a program the walk cannot serve, before a single equation runs."""

    def check_constants(self, values: Sequence[Any]) -> None:
        """Refuses constants that cannot be recorded."""

    def make_walk(self, session: CaptureSession, entry: Entry) -> ProgramWalk:
        raise NotImplementedError

    def output_paths(self, structure: Any) -> List[Path]:
        """The path of each output leaf of the output structure, in order."""
        raise NotImplementedError


def run_program_capture(
    adapter: BackendProtocol, request: CaptureRequest, hooks: ProgramCaptureHooks
) -> Trace:
    """One capture by program (the module docstring gives the order)."""
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
    with CaptureSession(request) as session:
        walk = hooks.make_walk(session, entry)
        session.module(0, ["self"], root.class_name or "function", False, False)
        session.extra("provenance.param_source", hooks.param_source if root.params else "none")
        session.extra("provenance.module_identity_mode", root.kind)
        root.declare_modules(session)
        pairs = []
        for name, value in root.params:
            value = walk.as_value(value)
            pairs.append(walk.param(name, root.param_module(name), value, root.param_trainable(name)))
        for name, value in root.inputs:
            pairs.append(walk.input(name, walk.as_value(value)))
        consts = [walk.constant(value) for value in constants]
        session.enter(0)
        if root.scope_names is not None:
            walk.scopes = ModuleScopes(session, walk, root.scope_names)
        outs = walk.run(body, consts, pairs, top=True)
        session.exit(0, [value_id for _, value_id in outs if value_id is not None])
        for path, pair in zip(hooks.output_paths(output_tree), outs):
            suffix = root.path_name(path)
            walk.output("output" + ("." + suffix if suffix else ""), pair)
        runtime = ProgramRuntime(
            records=walk.records,
            reference=lambda: adapter.output_leaves(root.flat(*root.dynamic)),
            params=walk.params,
            param_dtypes=walk.param_dtypes,
            values=walk.values,
            root=root,
            capture=walk,
            output_tree=output_tree,
        )
        trace = session.finish(adapter, runtime=runtime)
    grad_options = request.options.grad_options
    if grad_options is not None:
        trace.autograd = derived_grads.derive(adapter.make_grad_hooks(trace, grad_options))
    return trace
