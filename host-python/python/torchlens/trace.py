"""The public trace: ops, layers, modules and params, backed by the core's trace."""

from __future__ import annotations

import os
import warnings
import weakref
from typing import Any, Callable, Dict, Iterator, List, MutableMapping, Optional, Sequence, Union

from . import tlspec_write
from .argument_checks import flag, path_argument, short_repr
from .atomic_file import atomic_file
from .backward import to_core_json
from .capability_gate import gate
from .collector_pause import collector_paused
from .edits import FireRecord
from .edits.fork import ForkedTrace
from .errors import (
    ArgumentError,
    NotFoundError,
    OpIndexError,
    SelectorMatchedNothingWarning,
    UnsupportedError,
)
from .selectors import Selector, as_selector
from .terminal_text import shown


def warn_matched_nothing(selector: Selector, stacklevel: int = 3) -> None:
    """Warns that a selector matched no op (``stacklevel`` points the warning at the caller's
    line)."""
    warnings.warn(
        f"{selector!r} matched no op; check the labels with trace.labels or trace.summary()",
        SelectorMatchedNothingWarning,
        stacklevel=stacklevel,
    )


class TraceCore:
    """What an op or a param reads from its trace: the core's trace, the payloads and their
    guard, the backend, the gradients. Ops and params hold this rather than the
    :class:`Trace`: the trace caches its ops, and ops holding the trace back would form a
    reference cycle, which only the cyclic collector frees; a dropped trace's values would then
    stay in memory until a full collection (rare in a large process), one trace after another."""

    __slots__ = ("native", "payloads", "payload_guard", "backend", "backward", "autograd", "_trace")

    def __init__(
        self, native: Any, payloads: MutableMapping[int, Any], backend: Any, payload_guard: Any
    ) -> None:
        self.native = native
        self.payloads = payloads
        self.payload_guard = payload_guard
        self.backend = backend
        self.backward: Any = None
        self.autograd = Autograd()
        self._trace: Any = None

    def attach(self, trace: Trace) -> None:
        """Names the trace whose cached ops navigation returns (held weakly)."""
        self._trace = weakref.ref(trace)

    def ops(self) -> List[Op]:
        """The trace's ops: its cached objects while it lives; new ones once it is gone (an op
        kept after its trace was dropped still navigates)."""
        trace = self._trace() if self._trace is not None else None
        if trace is not None:
            return trace.ops
        with collector_paused():
            return [Op(self, info) for info in self.native.ops()]

    def payload(self, slot: int) -> Any:
        """The value in a payload slot (None if not kept), checked by the backend's guard."""
        value = self.payloads.get(slot)
        if value is not None and self.payload_guard is not None:
            self.payload_guard(slot, value)
        return value

    def payload_numpy(self, slot: int) -> Any:
        """The value in a payload slot as a NumPy array (None if not kept): read from the file
        without its framework for a loaded trace (:mod:`torchlens.lazy_payloads`)."""
        from_file = getattr(self.payloads, "numpy", None)
        if from_file is not None:
            return from_file(slot)
        value = self.payload(slot)
        return None if value is None else self.backend.to_numpy(value)

    def current_autograd(self) -> Autograd:
        """The trace's gradients, told which backward passes the trace holds now."""
        self.autograd._backward = self.backward
        return self.autograd


class Op:
    """One operation of a trace. ``out`` is its saved value (None when not saved)."""

    __slots__ = ("_core", "_info")

    def __init__(self, core: TraceCore, info: Dict[str, Any]) -> None:
        self._core = core
        self._info = info

    @property
    def index(self) -> int:
        """The op's position in capture order (``trace.ops[op.index] is op``)."""
        return self._info["id"]

    @property
    def label(self) -> str:
        """The op's label: ``<type>_<layer>_<op>``, with ``:<pass>`` when its layer ran more than once."""
        return self._info["label"]

    @property
    def layer_label(self) -> str:
        """The label of the op's layer (every pass of a recurrent op shares it)."""
        return self._info["layer_label"]

    @property
    def pass_number(self) -> int:
        """Which pass of its layer this op is (1 for the first)."""
        return self._info["pass_number"]

    @property
    def num_passes(self) -> int:
        """How many times the op's layer ran."""
        return self._info["num_passes"]

    @property
    def func_name(self) -> str:
        """The function the model called (``relu``, ``__add__``, ``conv2d``)."""
        return self._info["func_name"]

    @property
    def op_type(self) -> str:
        """The core's normalized function type (``__radd__`` → ``add``), what ``tl.func`` matches."""
        return self._info["op_type"]

    @property
    def kind(self) -> str:
        """``compute``, ``input``, ``output``, ``constant``, ``buffer`` or ``literal_producer``."""
        return self._info["kind"]

    @property
    def is_input(self) -> bool:
        """Whether the op is a model input."""
        return self.kind == "input"

    @property
    def is_output(self) -> bool:
        """Whether the op is a model output."""
        return self.kind == "output"

    @property
    def is_constant(self) -> bool:
        """Whether the op is a constant read from outside the recorded ops."""
        return self.kind == "constant"

    @property
    def shape(self) -> tuple:
        """The output's shape."""
        return tuple(self._info["shape"])

    @property
    def dtype(self) -> str:
        """The output's dtype, by the core's name (``float32``, ``bfloat16``)."""
        return self._info["dtype"]

    @property
    def parents(self) -> List[Op]:
        """The ops whose values this op read, in argument order."""
        return [self._core.ops()[parent] for parent, _ in self._info["parents"]]

    @property
    def parent_positions(self) -> List[int]:
        """The argument position each parent fed."""
        return [position for _, position in self._info["parents"]]

    @property
    def children(self) -> List[Op]:
        """The ops that read this op's value."""
        return [self._core.ops()[child] for child, _ in self._info["children"]]

    @property
    def params(self) -> List[str]:
        """Addresses of the parameters the op read."""
        return list(self._info["params"])

    @property
    def module(self) -> str:
        """The innermost module call, ``address:call`` (``self`` for the root)."""
        return self._info["module_stack"][0]

    @property
    def module_stack(self) -> List[str]:
        """The module calls the op ran inside, ``address:call``, innermost first, ending with ``self``."""
        return list(self._info["module_stack"])

    @property
    def in_place(self) -> bool:
        """Whether the op wrote into one of its inputs."""
        return self._info["in_place"]

    @property
    def source(self) -> Optional[tuple]:
        """``(file, line, function)`` of the user code that ran the op. A backend that does not
        record source lines refuses (``BackendUnsupportedError``) rather than answer None."""
        gate(self._core.backend.spec, "source_lines")
        return self._info["source"]

    @property
    def site_key(self) -> str:
        """Where the op ran, independent of the run's values (what patching pairs ops by)."""
        return self._info["site_key"]

    @property
    def attributes(self) -> Dict[str, str]:
        """The op's non-array arguments, as the backend recorded them (name → text)."""
        return dict(self._info["attributes"])

    @property
    def input_ancestors(self) -> List[str]:
        """Labels of the model inputs this op's value was computed from."""
        return [self._core.ops()[op].label for op in self._info["input_ancestors"]]

    @property
    def output_descendants(self) -> List[str]:
        """Labels of the model outputs this op's value flows into."""
        return [self._core.ops()[op].label for op in self._info["output_descendants"]]

    @property
    def min_distance_from_input(self) -> Optional[int]:
        """The fewest ops between a model input and this op (None when unreachable or not computed)."""
        return self._info.get("min_distance_from_input")

    @property
    def max_distance_from_input(self) -> Optional[int]:
        """The most ops between a model input and this op (None when unreachable or not computed)."""
        return self._info.get("max_distance_from_input")

    @property
    def min_distance_to_output(self) -> Optional[int]:
        """The fewest ops between this op and a model output (None when unreachable or not computed)."""
        return self._info.get("min_distance_to_output")

    @property
    def max_distance_to_output(self) -> Optional[int]:
        """The most ops between this op and a model output (None when unreachable or not computed)."""
        return self._info.get("max_distance_to_output")

    @property
    def saved(self) -> bool:
        """Whether the op's own value was kept (an output node shows its producer's value)."""
        slot = self._info["payload"]
        return slot is not None and slot in self._core.payloads

    @property
    def out(self) -> Any:
        """The op's saved value as a framework array, or None when it was not saved."""
        slot = self._info["payload"]
        if slot is None:
            if self.kind == "output" and self._info["parents"]:
                return self.parents[0].out
            return None
        return self._core.payload(slot)

    def numpy(self) -> Any:
        """The op's saved value as a NumPy array, or None when it was not saved. A loaded trace
        reads it from the file without importing the framework (a dtype NumPy lacks, such as
        ``bfloat16``, comes back as its raw bits); a live one converts with its backend."""
        slot = self._info["payload"]
        if slot is None:
            if self.kind == "output" and self._info["parents"]:
                return self.parents[0].numpy()
            return None
        return self._core.payload_numpy(slot)

    @property
    def value(self) -> Any:
        """The op's saved value (``out``): the name a ``tl.where`` predicate reads on a live op's
        :class:`~torchlens.edits.RecordContext`, so one predicate serves ``save=`` and
        ``trace.select``."""
        return self.out

    @property
    def is_edited(self) -> bool:
        """Whether an edit rule (``intervene=``) replaced this op's value during the run."""
        return bool(self._info["edits"])

    @property
    def edits(self) -> List[Any]:
        """The edits that fired on this op (the :class:`~torchlens.edits.FireRecord` list, as
        :attr:`fire_records`); ``interventions`` is the reference implementation's name."""
        return self.fire_records

    interventions = edits

    @property
    def fire_records(self) -> List[Any]:
        """The edits that fired on this op (:class:`~torchlens.edits.FireRecord`), in order:
        forward edits (timing ``post``), then gradient-site edits (timing ``backward``)."""
        backward = self._core.backward
        grad_edits = backward.edits.get(self.index, []) if backward is not None else []
        return [
            FireRecord(target_label=self.label, rule=rule, helper_name=action, timing=timing)
            for rule, action, timing in list(self._info["edits"]) + list(grad_edits)
        ]

    @property
    def grad(self) -> Any:
        """The gradient of the loss with respect to this op's output from the latest backward
        pass that reached it (``save_grads=``), or None."""
        backward = self._core.backward
        return backward.grad_of(self.index) if backward is not None else None

    @property
    def has_grad(self) -> bool:
        """Whether a gradient is known for this op (captured or derived)."""
        return self.grad is not None

    @property
    def autograd(self) -> OpAutograd:
        """The op's gradients: ``grads`` from captured backward passes (one per pass that
        reached it), ``derived_grad`` when the backend derived and checked one."""
        backward = self._core.backward
        return OpAutograd(
            self._core.current_autograd().intermediate_derived_grads.get(self.label),
            backward.grads_of(self.index) if backward is not None else [],
        )

    def __repr__(self) -> str:
        # Names may come from a file from anyone: shown with control characters escaped.
        return shown(f"<Op {self.label} {self.func_name} {list(self.shape)} {self.dtype} in {self.module}>")


class Layer:
    """One site of the model and the ops of each of its passes."""

    def __init__(self, core: TraceCore, label: str, op_type: str, ops: Sequence[int]) -> None:
        self._core = core
        self.label = label
        self.op_type = op_type
        self._ops = list(ops)

    @property
    def passes(self) -> List[Op]:
        """The layer's ops, one per pass, in order."""
        return [self._core.ops()[op] for op in self._ops]

    @property
    def num_passes(self) -> int:
        """How many times the layer ran."""
        return len(self._ops)

    def __repr__(self) -> str:
        return shown(f"<Layer {self.label} ({self.num_passes} pass{'es' if self.num_passes != 1 else ''})>")


def _field(key: str, doc: str, convert: Optional[Callable[[Any], Any]] = None) -> property:
    """A read-only property reading ``key`` of the object's core record (a copy through
    ``convert`` for lists and tuples), documented with ``doc``."""
    if convert is None:
        return property(lambda self: self._info[key], doc=doc)
    return property(lambda self: convert(self._info[key]), doc=doc)


class Module:
    """A module of the model and its calls."""

    def __init__(self, info: Dict[str, Any]) -> None:
        self._info = info

    address = _field("address", "The module's primary address (``encoder.layers.0``; ``self`` for the root).")
    all_addresses = _field(
        "all_addresses", "Every address the module is reachable by (a shared one has several).", list
    )
    class_name = _field("class_name", "The module's class name.")
    params = _field("params", "Addresses of the parameters the module owns directly.", list)
    children = _field("children", "Addresses of the module's direct submodules.", list)
    parent = _field("parent", "The address of the module that holds this one (None for the root).")
    is_container = _field(
        "container", "Whether the module only groups others (a sequence or list of modules)."
    )
    training = _field("training", "Whether the module was in training mode during the capture.")

    @property
    def num_calls(self) -> int:
        """How many times the module was called during the capture."""
        return len(self._info["calls"])

    @property
    def calls(self) -> List[str]:
        """The module's calls, ``address:call``, in order."""
        return [call[0] for call in self._info["calls"]]

    def __repr__(self) -> str:
        return shown(f"<Module {self.address} {self.class_name} ({self.num_calls} calls)>")


class Param:
    """A parameter of the model. ``grad`` is its derived gradient, when the trace's backend
    derived one (``trace.autograd.derived_grads["params.<address>"]``), else None."""

    def __init__(self, info: Dict[str, Any], core: Optional[TraceCore] = None) -> None:
        self._info = info
        self._core = core

    address = _field("address", "The parameter's address (``encoder.fc.weight``).")
    module = _field("module", "The address of the module that owns the parameter.")
    shape = _field("shape", "The parameter's shape.", tuple)
    dtype = _field("dtype", "The parameter's dtype, by the core's name.")
    trainable = _field("trainable", "Whether the parameter is trainable (requires a gradient).")

    @property
    def num_users(self) -> int:
        """How many ops read the parameter."""
        return len(self._info["users"])

    @property
    def grad(self) -> Any:
        """The gradient of the loss with respect to this parameter (a framework array), or None:
        the derived gradient where the backend derived one, else the one a captured backward pass
        left (torch: the parameter's live ``.grad``; a loaded trace: the saved one). Read from the
        trace, so it is the same for every ``Param`` object of one address."""
        if self._core is None:
            return None
        derived = self._core.current_autograd().derived_grads.get(f"params.{self.address}")
        if derived is not None:
            return derived
        backward = self._core.backward
        if backward is None or backward.param_grad is None:
            return None
        return backward.param_grad(self.address)

    def __repr__(self) -> str:
        return shown(f"<Param {self.address} {list(self.shape)} {self.dtype}>")


def _module_addresses(value: Any, argument: str) -> List[str]:
    """A list of module addresses (``expanded=("encoder", "decoder.0")``)."""
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(item, str) for item in value):
        return list(value)
    raise ArgumentError(
        f"{argument} must be a list of module addresses, got {type(value).__name__} {short_repr(value)}",
        "argument_invalid",
        f'pass {argument}=["encoder", "decoder.0"] (one string is one address: wrap it in a list)',
    )


class Drawing:
    """An SVG drawing of a trace; shows inline in Jupyter."""

    #: What :meth:`save` writes, by the path's suffix.
    FORMATS = {".svg": "svg", ".html": "html", ".htm": "html"}

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str) -> None:
        """Writes the drawing to ``path`` (atomically), in the format its suffix names: ``.svg``,
        or ``.html`` (a page holding the SVG, for a browser). Any other suffix is refused
        (``draw_format_unsupported``) rather than written with SVG bytes under its name."""
        path = path_argument(path, "path", "graph.svg")
        suffix = os.path.splitext(path)[1].lower()
        kind = self.FORMATS.get(suffix)
        if kind is None:
            raise UnsupportedError(
                f"cannot draw into {path!r}: TorchLens writes .svg and .html, "
                f"not {suffix or 'a file without a suffix'}",
                "draw_format_unsupported",
                "name the file graph.svg (or graph.html); convert the SVG with a tool such as "
                "cairosvg or inkscape for PNG or PDF",
            )
        text = self.svg if kind == "svg" else _html_page(self.svg)
        with atomic_file(path, "w", prefix=".draw-") as stream:
            stream.write(text)


def _html_page(svg: str) -> str:
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>TorchLens graph</title></head>\n'
        f"<body>\n{svg}\n</body></html>\n"
    )


class Provenance:
    """Where a trace's facts came from, as the backend reported them (``param_source``:
    ``"pytree-derived"``, ``"module"`` or ``"none"``; ``module_identity_mode``)."""

    def __init__(self, facts: Dict[str, str]) -> None:
        self._facts = dict(facts)

    def __getattr__(self, name: str) -> Optional[str]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._facts.get(name)

    def as_dict(self) -> Dict[str, str]:
        """The provenance facts as a plain dict."""
        return dict(self._facts)

    def __repr__(self) -> str:
        return f"<Provenance {self._facts}>"


class DerivedGrad:
    """One op's derived gradient record: ``value`` (a framework array), ``status`` (``exact``:
    the only status that is ever exposed) and the independent ``checks`` it passed. NumPy reads
    it as its value (``np.asarray(record)``)."""

    __slots__ = ("value", "status", "checks")

    def __init__(self, value: Any, status: str = "exact", checks: Sequence[str] = ()) -> None:
        self.value = value
        self.status = status
        self.checks = tuple(checks)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        return numpy.asarray(self.value, dtype=dtype)

    def __repr__(self) -> str:
        return f"<DerivedGrad {self.status} {getattr(self.value, 'shape', '')} checks={list(self.checks)}>"


class Autograd:
    """Gradients attached to a trace. ``derived_grads`` are leaf gradients of a loss computed
    by the backend's own autodiff (keys ``params.<address>`` and ``inputs.<n>``);
    ``intermediate_derived_grads`` maps op labels to checked per-op :class:`DerivedGrad`
    records. Neither is a
    captured backward pass: ``has_backward_pass`` stays False."""

    def __init__(
        self, derived_grads: Optional[dict] = None, intermediate_derived_grads: Optional[dict] = None
    ) -> None:
        self.derived_grads: Dict[str, Any] = dict(derived_grads or {})
        self.intermediate_derived_grads: Dict[str, Any] = dict(intermediate_derived_grads or {})
        #: Why per-op derived gradients were asked for but are absent (a stable code), or None.
        self.intermediate_unavailable: Optional[str] = None
        #: The trace's captured backward passes (set by the trace), or None.
        self._backward: Any = None

    @property
    def has_backward_pass(self) -> bool:
        """Whether a true backward pass was captured (never from derived gradients)."""
        return self._backward is not None and self._backward.passes > 0

    def __repr__(self) -> str:
        return (
            f"<Autograd {len(self.derived_grads)} derived grads, "
            f"{len(self.intermediate_derived_grads)} intermediate>"
        )


class OpAutograd:
    """An op's gradient facts: ``derived_grad`` is its checked :class:`DerivedGrad` (or None);
    ``grads`` its output gradients from captured backward passes, one per pass that reached it
    (empty without ``save_grads=``)."""

    __slots__ = ("derived_grad", "grads")

    def __init__(self, derived_grad: Any, grads: Optional[List[Any]] = None) -> None:
        self.derived_grad = derived_grad
        self.grads: List[Any] = list(grads or [])


class Trace:
    """What ran: every op with its function, module, shape, dtype, parents and saved value."""

    def __init__(
        self,
        native: Any,
        payloads: MutableMapping[int, Any],
        backend: Any,
        manifest: Optional[dict] = None,
        runtime: Any = None,
        payload_guard: Optional[Callable[[int, Any], None]] = None,
    ) -> None:
        #: What the ops read (the core's trace, payloads and guard, backend, gradients): see
        #: :class:`TraceCore`. The attributes below of the same names read and write it.
        self._core = TraceCore(native, payloads, backend, payload_guard)
        self._core.attach(self)
        #: Runtime-only replay data (None for a loaded trace).
        self._runtime = runtime
        self._manifest = manifest or {}
        self._ops: Optional[List[Op]] = None
        self._params: Optional[Dict[str, Param]] = None
        self._info: Optional[dict] = None
        #: The model's output as it returned it. With ``save_grads=`` or ``backward_ready=True``
        #: it keeps its autograd graph (call ``.backward()`` on a loss of it); otherwise its
        #: arrays are detached. None for a loaded trace and where the backend does not keep it.
        self.output: Any = None
        #: What a load materialized for each payload (None for a live trace).
        self.payload_load_status: Optional[dict] = None
        #: The ``facets=`` the capture was asked for.
        self.facets: Any = None
        #: Labels of ops a narrow ``save=`` matched whose values were released during capture
        #: before the selection was decided (see ``SelectionIncompleteWarning``); normally empty.
        self.selection_missed: List[str] = []
        #: The :class:`~torchlens.options.CaptureOptions` the capture ran with, as the backend
        #: resolved them (``module_identity_mode`` names the mode it chose), or None where the
        #: backend does not report them (a loaded trace).
        self.options: Any = None

    # ---- what the ops share (kept in the TraceCore) ---------------------------------------------

    @property
    def _native(self) -> Any:
        return self._core.native

    @_native.setter
    def _native(self, native: Any) -> None:
        self._core.native = native

    @property
    def _payloads(self) -> MutableMapping[int, Any]:
        return self._core.payloads

    @_payloads.setter
    def _payloads(self, payloads: MutableMapping[int, Any]) -> None:
        self._core.payloads = payloads

    @property
    def _payload_guard(self) -> Optional[Callable[[int, Any], None]]:
        """Raises when a payload that is the model's own array was changed after capture."""
        return self._core.payload_guard

    @_payload_guard.setter
    def _payload_guard(self, guard: Optional[Callable[[int, Any], None]]) -> None:
        self._core.payload_guard = guard

    @property
    def _backend(self) -> Any:
        """The backend's protocol object (:class:`~torchlens.backends.BackendProtocol`)."""
        return self._core.backend

    @_backend.setter
    def _backend(self, backend: Any) -> None:
        self._core.backend = backend

    @property
    def backward(self) -> Any:
        """The captured backward passes (:class:`~torchlens.backward.BackwardRecord`) where
        ``save_grads=``/``backward_ready=True`` armed them, else None."""
        return self._core.backward

    @backward.setter
    def backward(self, record: Any) -> None:
        self._core.backward = record

    # ---- gradients -------------------------------------------------------------------------

    @property
    def autograd(self) -> Autograd:
        """Gradients attached to the trace: derived gradients, and whether a true backward pass
        was captured (``has_backward_pass``)."""
        return self._core.current_autograd()

    @autograd.setter
    def autograd(self, value: Autograd) -> None:
        self._core.autograd = value

    @property
    def has_backward_pass(self) -> bool:
        """Whether a backward pass reached the trace's outputs since the capture."""
        return self.backward is not None and self.backward.passes > 0

    @property
    def num_backward_passes(self) -> int:
        """How many backward passes were captured (0 without ``save_grads=``)."""
        return self.backward.passes if self.backward is not None else 0

    @property
    def save_grads(self) -> bool:
        """Whether the capture was armed to save gradients (``save_grads=``)."""
        return self.backward is not None and self.backward.save_grads

    @property
    def backward_ready(self) -> bool:
        """Whether the trace keeps what a later backward needs (its output's autograd graph)."""
        return self.backward is not None

    @property
    def saved_grad_ops(self) -> List[Op]:
        """The ops that have a gradient from a captured backward pass, in capture order."""
        if self.backward is None:
            return []
        return [self.ops[index] for index in sorted(self.backward.grads)]

    @property
    def backward_graph(self) -> Any:
        """The backward graph (:class:`~torchlens.backward.BackwardGraph`), or None where no
        backward capture was armed."""
        return self.backward.graph if self.backward is not None else None

    @property
    def grad_fns(self) -> List[Any]:
        """The backward graph's nodes (:class:`~torchlens.backward.GradFn`), roots first."""
        return list(self.backward.graph.nodes) if self.backward is not None else []

    # ---- structure -------------------------------------------------------------------------

    @property
    def info(self) -> dict:
        """Counts, inputs, outputs and capture status (the core's trace info)."""
        info = self._info
        if info is None:
            info = self._info = self._native.info()
        return info

    @property
    def manifest(self) -> dict:
        """The manifest of the ``.tlspec`` this trace was loaded from (empty for a live trace):
        backend, payload checksums and the ``extra`` keys, such as ``source_paths``."""
        return dict(self._manifest)

    @property
    def ops(self) -> List[Op]:
        """Every op, in capture order."""
        if self._ops is None:
            # Tens of objects per op at once: the cyclic collector would walk the whole heap
            # several times over on a large trace (see collector_pause).
            with collector_paused():
                self._ops = [Op(self._core, info) for info in self._native.ops()]
        return self._ops

    @property
    def layers(self) -> List[Layer]:
        """The layers: the ops grouped by layer (a recurrent op's passes share one)."""
        return [Layer(self._core, label, op_type, ops) for label, op_type, ops in self._native.layers()]

    @property
    def layer_labels(self) -> List[str]:
        """Every layer's label, in order."""
        return [label for label, _, _ in self._native.layers()]

    @property
    def labels(self) -> List[str]:
        """Every op's label, in capture order."""
        return [op.label for op in self.ops]

    @property
    def modules(self) -> Dict[str, Module]:
        """The model's modules, the root first."""
        return {info["address"]: Module(info) for info in self._native.modules()}

    @property
    def params(self) -> Dict[str, Param]:
        """Every parameter by address; the ``Param`` objects are built once per trace (the same
        object on every access)."""
        if self._params is None:
            self._params = {info["address"]: Param(info, self._core) for info in self._native.params()}
        return dict(self._params)

    @property
    def inputs(self) -> List[Op]:
        """The model-input ops."""
        return [self.ops[op] for op in self.info["inputs"]]

    @property
    def outputs(self) -> List[Op]:
        """The model-output ops, in the order the model returned them."""
        return [self.ops[op] for op in self.info["outputs"]]

    @property
    def backend(self) -> str:
        """The name of the backend that captured (or loaded) the trace."""
        return self._backend.name

    @property
    def spec(self) -> Any:
        """The backend's declaration (:class:`~torchlens.backends.BackendSpec`)."""
        return self._backend.spec

    def fork(self, name: Optional[str] = None) -> Any:
        """An editable copy of this trace (:class:`~torchlens.edits.fork.ForkedTrace`):
        ``trace.fork().do(tl.when(selector, action))`` runs the model again under the edit and
        returns a new trace; this one is untouched. Patching from another run is an action:
        ``do(selector, tl.patch_from(other_trace))``."""
        gate(self.spec, "edit_finished_trace")
        return ForkedTrace(self, name)

    @property
    def provenance(self) -> Provenance:
        """Facts the backend reported about where the trace's records came from."""
        prefix = "provenance."
        return Provenance(
            {key[len(prefix) :]: value for key, value in self.info["extras"] if key.startswith(prefix)}
        )

    @property
    def capture_verified(self) -> bool:
        """Whether the backend vouches that every op was seen (False names a reason and warned)."""
        return self.info["capture_verified"]

    @property
    def capture_reason(self) -> Optional[str]:
        """Why the capture is not verified (None when it is)."""
        return self.info["capture_reason"]

    @property
    def is_stopped(self) -> bool:
        """Whether ``stop_after=`` ended the forward early."""
        return self.info["stop_reason"] is not None

    @property
    def stop_reason(self) -> Optional[str]:
        """Why the forward stopped early (None when it ran to the end)."""
        return self.info["stop_reason"]

    @property
    def saved_ops(self) -> List[Op]:
        """The ops whose values were kept (``save=``), in capture order."""
        return [op for op in self.ops if op.saved]

    def __len__(self) -> int:
        return self.info["op_count"]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __getitem__(self, key: Union[int, str]) -> Op:
        """``trace["relu_1_3"]``, ``trace["relu_1_3:2"]``, ``trace[5]`` or ``trace[-1]``."""
        if isinstance(key, int) and not isinstance(key, bool):
            ops = self.ops
            if not -len(ops) <= key < len(ops):
                raise OpIndexError(
                    f"op {key} is out of range: the trace has {len(ops)} ops",
                    "op_index_out_of_range",
                    f"pass an index from {-len(ops)} to {len(ops) - 1}, or a label (trace.labels)",
                )
            return ops[key]
        if not isinstance(key, str):
            raise ArgumentError(
                f"an op is named by its label or its index, got {type(key).__name__} {short_repr(key)}",
                "argument_invalid",
                'pass a label such as trace["relu_1_3"] or an index such as trace[0]',
            )
        index = self._native.find_label(key)
        if index is None:
            raise NotFoundError(
                f"no op is labelled {key!r}", "label_not_found", "see trace.labels for the labels"
            )
        return self.ops[index]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._native.find_label(key) is not None

    def select(self, selector: Any) -> List[Op]:
        """The ops a selector matches, in capture order."""
        selector = as_selector(selector)
        predicates = selector.predicates()
        where_results = [
            (index, [op.index for op in self.ops if predicate(op)])
            for index, predicate in enumerate(predicates)
        ]
        matched = self._native.select(selector.arena(), where_results)
        if not matched:
            warn_matched_nothing(selector)
        return [self.ops[op] for op in matched]

    def ancestors(self, op: Union[int, str]) -> List[Op]:
        """The ops ``op`` (a label or index) was computed from, directly or not, in capture order."""
        return [self.ops[index] for index in self._native.ancestors(self._index(op))]

    def descendants(self, op: Union[int, str]) -> List[Op]:
        """The ops ``op`` (a label or index) flows into, directly or not, in capture order."""
        return [self.ops[index] for index in self._native.descendants(self._index(op))]

    def _index(self, op: Union[int, str]) -> int:
        return self[op].index

    def _payload(self, slot: int) -> Any:
        """The value in a payload slot (None if not kept), checked by the backend's guard."""
        return self._core.payload(slot)

    # ---- validation --------------------------------------------------------------------------

    def validate_forward_pass(self, outputs: Any = None) -> Any:
        """Replay validation: True or False when the outcome is final, otherwise the
        :class:`~torchlens.validation.ValidationStatus` (``unverified``, ``unavailable``)."""
        gate(self.spec, "validation_replay")
        return self._backend.validate(self, outputs)

    @property
    def validation_replay_status(self) -> Any:
        """The full :class:`~torchlens.validation.ValidationStatus` of replay validation."""
        return self._backend.validation_status(self)

    # ---- output ----------------------------------------------------------------------------

    def _sync_backward(self) -> None:
        """Hands the core the backward pass as it stands now (a backward may have run since the
        capture), so the summary, the drawing and ``.tlspec`` files include it."""
        if self.backward is None:
            return
        labels = {op.label: op.index for op in self.ops}
        self._native.set_backward(to_core_json(self.backward, labels))

    def summary(self) -> str:
        """A table of every op: label, function, module, shape, dtype, saved, parents; then,
        where a backward pass was captured, one row per grad_fn."""
        self._sync_backward()
        return self._native.summary_table()

    def draw(
        self,
        path: Optional[str] = None,
        collapsed: bool = False,
        expanded: Sequence[str] = (),
        backward: bool = False,
    ) -> Drawing:
        """Draws the graph as SVG (``collapsed=True``: one box per module, ``expanded`` opens
        some; ``backward=True``: the backward graph, one box per autograd function, where the
        trace has one). Saved to ``path`` when given; shows inline in Jupyter."""
        flag(collapsed, "collapsed")
        flag(backward, "backward")
        expanded = _module_addresses(expanded, "expanded")
        if backward:
            if self.backward is None:
                raise NotFoundError(
                    "this trace has no backward graph to draw",
                    "layout_no_backward",
                    "trace with save_grads=True or CaptureOptions(backward_ready=True) (torch)",
                )
            self._sync_backward()
        drawing = Drawing(self._native.svg(collapsed, list(expanded), backward))
        if path is not None:
            drawing.save(path)
        return drawing

    def save(self, path: str, source_paths: str = "relative") -> None:
        """Saves the trace and its saved values as one ``.tlspec`` file (atomically).

        ``source_paths`` says how op source files are written: ``"relative"`` (default) to the
        deepest folder holding every recorded file, so a shared file does not reveal where it
        was made; ``"absolute"`` as recorded; ``"none"`` without source locations. The file's
        manifest records the choice (``source_paths``). A path that cannot be written is a
        :class:`~torchlens.errors.FileAccessError` naming it (also the matching ``OSError``)."""
        path = path_argument(path, "path", "run.tlspec")
        tlspec_write.save(self, path, source_paths=source_paths)

    def __repr__(self) -> str:
        info = self.info
        return (
            f"<Trace {self.backend}: {info['op_count']} ops, {info['layer_count']} layers, "
            f"{info['module_count']} modules, {len(self._payloads)} saved>"
        )
