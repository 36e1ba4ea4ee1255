"""The capture pipeline, written once for every wrapper-based backend:

request (already gated by the kit's preflight) → backend refusals → module identity mode →
live edits checked → the backend's last check → session and patches opened → modules,
parameters and inputs declared → edits attached → op interception installed → the forward (the
root call bracketed) → early stop or outputs → patches removed → provenance → realize-once →
runtime → finish (or abort on any error, by the session) → derived gradients.

A backend supplies a :class:`CaptureHooks` subclass: its recorder (usually a
:class:`~torchlens.adapter_kit.recorder.Recorder`), its interception, and where its framework
differs, the hook that says so. The order above, the typed refusals before side effects, the
provenance every trace carries, realize-once before any payload is read and the derived-gradient
driver are the kit's, so a backend cannot leave one out."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Type, Union

from . import derived_grads
from .live_edits import StopSignal, selector_kinds
from .replay import ReplayRuntime, output_structure
from .request import CaptureRequest
from .session import CaptureSession
from .wrappers import Patches

if TYPE_CHECKING:  # only named in signatures
    from ..trace import Trace
    from .protocol import BackendProtocol


@dataclass
class CallRuntime(ReplayRuntime):
    """Runtime-only data of a live trace (never saved): what replay reads, plus the call that
    derived gradients run again."""

    model: Any = None
    args: tuple = ()
    kwargs: Any = None
    #: Parameter value id → its address (derived gradients name a parameter's gradient by it).
    param_addresses: Dict[int, str] = dataclasses.field(default_factory=dict)


class CaptureHooks:
    """One capture's framework side, made fresh for each capture by the backend's
    ``capture_hooks`` type. The pipeline sets :attr:`mode`, :attr:`session`, :attr:`patches`
    and :attr:`recorder` as it reaches them."""

    #: The runtime the trace keeps (a subclass of :class:`CallRuntime` adds a backend's fields,
    #: filled from :meth:`runtime_fields`).
    runtime_type: Type[CallRuntime] = CallRuntime
    #: What the forward raises at the ``stop_after=`` frontier.
    stop_signal: Type[BaseException] = StopSignal
    #: The backend's live edits (``intervene=``, ``stop_after=``), made when a request asks for
    #: them; None when the backend has none (the gate refused such requests already).
    live_edits_type: Optional[Callable[[CaptureRequest, BackendProtocol], Any]] = None
    #: Whether the framework's arrays are lazy while the forward runs (realized once, after): a
    #: rule that reads a value (``tl.where``) cannot be decided live, so it refuses
    #: (``value_dependent_predicate``) before the model runs.
    lazy_values: bool = False

    #: The request's live edits (set by the pipeline from :meth:`live_edits`; None without).
    edits: Any = None
    #: The open session and patches (set by the pipeline once they are open; a gradient pass's
    #: rerun records onto a shadow session instead).
    session: Union[CaptureSession, derived_grads.ShadowSession]
    patches: Patches
    #: This capture's recorder (a :class:`~torchlens.adapter_kit.recorder.Recorder`, or a
    #: backend's own with ``values``, ``records``, ``params``, ``param_dtypes``, ``id_of`` and
    #: ``exit``), set once :meth:`make_recorder` made it.
    recorder: Any

    def __init__(self, adapter: BackendProtocol, request: CaptureRequest) -> None:
        self.adapter, self.request = adapter, request
        self.model = request.model
        self.mode = ""

    # ---- before anything runs -------------------------------------------------------------------

    def check(self) -> None:
        """The backend's refusals of this request (raised before any side effect)."""

    def live_edits(self) -> Any:
        """The request's live edits, checked now, or None."""
        request = self.request
        if self.live_edits_type is None or not (request.interventions or request.stop_after is not None):
            return None
        rules = [rule.condition for rule in request.interventions]
        rules += [request.stop_after.selector] if request.stop_after is not None else []
        if self.lazy_values and any("where" in selector_kinds(rule) for rule in rules):
            raise self.adapter.refuse(
                f"tl.where(...) cannot be decided live on {self.adapter.name}: its arrays are lazy "
                "until the forward ends",
                "value_dependent_predicate",
                "use a static selector: tl.func, tl.label, tl.label_contains, tl.in_module or tl.module",
            )
        return self.live_edits_type(request, self.adapter)

    def last_check(self) -> None:
        """The backend's refusals that need every other check passed first, because they run
        the model's code (without effects, e.g. tracing the call into a graph); the
        session is not open yet."""

    # ---- inside the session ----------------------------------------------------------------------

    def make_recorder(self) -> Any:
        """This capture's recorder (the session and patches are open)."""
        raise NotImplementedError

    def declare_modules(self) -> None:
        """Declares the root (module 0) and, for a module root, its modules and parameters."""
        if self.mode == "object_module":
            self.recorder.declare_modules(self.model)
        else:
            self.recorder.declare_root_function(self.model)

    def declare_input(self, name: str, value: Any) -> None:
        self.recorder.input(name, value)

    def attach_edits(self, edits: Any) -> None:
        """Compiles the edits against the declared modules; the kit's recorder hands each op
        output and each module call's outputs to them (its two live-edit seams)."""
        edits.attach(self.session, self.recorder, self.patches)
        self.recorder.on_output, self.recorder.on_exit = edits.on_output, edits.on_exit

    def install(self) -> None:
        """Installs op interception and module call reporting on :attr:`patches`."""
        raise NotImplementedError

    def root_call_reported(self) -> bool:
        """Whether module call reporting brackets the root call itself (else the kit does)."""
        return False

    def call(self) -> Any:
        """Runs the forward. An error the recorder or an edit raised inside it surfaces as
        itself where the framework re-raised it as another type (``recorder.error``)."""
        try:
            return self.model(*self.request.args, **self.request.kwargs)
        except Exception as error:
            raised = getattr(self.recorder, "error", None)
            if raised is not None and raised is not error:
                raise raised from error
            raise

    def exit_root(self, output: Any) -> Any:
        """The root call returned ``output``; returns what the capture reports."""
        return self.recorder.exit(0, output)

    def declare_outputs(self, output: Any) -> None:
        for name, value in self.adapter.output_pairs(output):
            value_id = self.recorder.id_of(value)
            if value_id is not None:
                self.session.output(name, value_id)

    def finish_stopped(self, edits: Any, signal: BaseException) -> None:
        """The forward ended at the ``stop_after=`` frontier."""
        edits.finish_stopped(self.session, signal)

    def provenance(self) -> Dict[str, str]:
        """Backend facts the manifest carries (``provenance.<name>`` keys)."""
        return {}

    def ceilings(self) -> List[str]:
        """Reasons the capture may be incomplete (each ceilings ``capture_verified`` and warns,
        every time)."""
        return []

    def realize_all(self) -> None:
        """Evaluates every recorded value, every parameter and every value an edit replaced in
        one framework evaluation: the adapter's ``realize`` (lazy frameworks; an eager one's
        returns them as they are)."""
        recorder = self.recorder
        replaced = [before for _, before in self.edits.fired.values()] if self.edits is not None else []
        self.adapter.realize(list(recorder.values.values()) + list(recorder.params.values()) + replaced)

    def reference(self) -> Callable[[], List[Any]]:
        """What replay validation compares the outputs with."""
        return self.adapter.reference_of(self.request)

    def runtime_fields(self) -> Dict[str, Any]:
        """The backend's own fields of :attr:`runtime_type`."""
        return {}

    def payload_guard(self) -> Optional[Callable[[int, Any], None]]:
        """A check run before a saved value is served (None: none)."""
        return None

    def finished(self, trace: Trace) -> None:
        """The trace exists (the session is closed)."""


def run_capture(adapter: BackendProtocol, request: CaptureRequest, hooks: CaptureHooks) -> Trace:
    """One capture through the kit's pipeline (the module docstring gives the order)."""
    options = request.options
    hooks.check()
    hooks.mode = mode = adapter.module_identity_mode(request)
    edits = hooks.edits = hooks.live_edits()
    hooks.last_check()
    with CaptureSession(request) as session, Patches() as patches:
        hooks.session, hooks.patches = session, patches
        recorder = hooks.recorder = hooks.make_recorder()
        hooks.declare_modules()
        session.extra("provenance.module_identity_mode", mode)
        session.extra("provenance.param_source", "module" if recorder.params else "none")
        for name, value in adapter.input_pairs(request.args, request.kwargs):
            hooks.declare_input(name, value)
        if edits is not None:
            hooks.attach_edits(edits)
        hooks.install()
        bracket_root = not hooks.root_call_reported()
        if bracket_root:
            session.enter(0)
        stopped: Optional[BaseException] = None
        output: Any = None
        try:
            output = hooks.call()
        except hooks.stop_signal as signal:
            stopped = signal
        if stopped is None and bracket_root:
            output = hooks.exit_root(output)
        patches.restore_all()
        if stopped is not None:
            hooks.finish_stopped(edits, stopped)
        else:
            hooks.declare_outputs(output)
        for key, value in hooks.provenance().items():
            session.extra(f"provenance.{key}", value)
        ceilings = hooks.ceilings()
        for reason in ceilings:
            session.mark_unverified(reason)
        # Realize-once: every recorded value in one evaluation, before any payload is read.
        hooks.realize_all()
        runtime = hooks.runtime_type(
            records=recorder.records,
            reference=hooks.reference(),
            params=recorder.params,
            param_dtypes=recorder.param_dtypes,
            param_addresses=getattr(recorder, "param_addresses", {}),
            values=recorder.values,
            model=request.model,
            args=request.args,
            kwargs=request.kwargs,
            output_structure=output_structure(adapter, output) if stopped is None else None,
            unresolved=getattr(recorder, "unresolved", set()),
            **hooks.runtime_fields(),
        )
        if edits is not None:
            edits.prepare_runtime(runtime)
        with warnings.catch_warnings():
            if ceilings:
                # A ceiling the backend found warns on every capture, not once per call site.
                warnings.simplefilter("always")
            trace = session.finish(adapter, runtime=runtime, payload_guard=hooks.payload_guard())
    hooks.finished(trace)
    trace.options = dataclasses.replace(options, module_identity_mode=mode)
    if options.grad_options is not None:
        trace.autograd = derived_grads.derive(adapter.make_grad_hooks(trace, options.grad_options))
    return trace


def shadow_run(
    adapter: BackendProtocol, trace: Trace, args: tuple, kwargs: Any
) -> Tuple[derived_grads.ShadowSession, Any, Any]:
    """Reruns a traced call with the capture's own hooks (its recorder, module declarations,
    inputs and interception) recording onto a :class:`~.derived_grads.ShadowSession` instead of
    the core: what a gradient pass matches against the captured ops. ``args`` and ``kwargs`` may
    stand in for the traced call's (differentiable copies of its inputs). Returns the shadow
    session, the recorder and the call's output."""
    runtime = trace._runtime
    request = CaptureRequest(adapter.spec, runtime.model, tuple(args), dict(kwargs or {}), trace.options)
    hooks = adapter.make_capture_hooks(request)
    hooks.mode = trace.options.module_identity_mode
    shadow = derived_grads.ShadowSession()
    with Patches() as patches:
        hooks.session, hooks.patches = shadow, patches
        recorder = hooks.recorder = hooks.make_recorder()
        hooks.declare_modules()
        for name, value in adapter.input_pairs(request.args, request.kwargs):
            hooks.declare_input(name, value)
        hooks.install()
        output = hooks.call()
    return shadow, recorder, output
