"""The typed protocol every adapter implements, and that product code calls: capture, the replay
hooks, host copies, the payload codec, realize-once for lazy frameworks, the reference output,
the edit apply hook and the closed set of refusal codes. Framework-neutral defaults are given
where one NumPy-level implementation serves every framework."""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from typing import Any, Callable, List, Mapping, Optional, Tuple, Type, Union

from ..capability_gate import refusal_codes
from ..errors import BackendUnsupportedError
from . import array_codec, framework_version, replay
from .capture_pipeline import CaptureHooks, run_capture
from .derived_grads import is_floating_dtype
from .preflight import check_request
from .program_capture import ProgramCaptureHooks, run_program_capture
from .request import CaptureRequest, SaveRequest
from .structures import named_arrays, named_inputs
from .wrappers import takes_turns

#: The registry's codes the gate raises for a request to any backend.
GATE_CODES = ("capability_unsupported", "option_unsupported", "option_value_invalid")


def _preflighted(capture: Callable[..., Any]) -> Callable[..., Any]:
    """``capture`` behind the kit's request checks (:mod:`.preflight`)."""

    @functools.wraps(capture)
    def checked(self: Any, request: Any) -> Any:
        check_request(self, request)
        return capture(self, request)

    return checked


class BackendProtocol(ABC):
    """One framework's adapter. ``spec`` is the backend's declaration (it arrives with the
    protocol object, so the adapter never looks itself up in the registry)."""

    #: Whether a capture replaces process-wide attributes (module functions, array methods,
    #: class attributes). The kit then makes this backend's captures on different threads take
    #: turns (:func:`~torchlens.adapter_kit.wrappers.takes_turns` around ``capture``): two
    #: overlapping captures would stack their wrappers, and the first to finish would restore
    #: the originals under the other. A backend whose hooks act per thread sets it False.
    patches_process_wide: bool = True

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    #: The backend's public ``tl.backends.<name>.GradOptions`` class; None when it derives no
    #: gradients. A request's ``grad_options`` of another type refuses in the kit's preflight.
    grad_options_type: Optional[type] = None

    #: The backend's :class:`~torchlens.adapter_kit.capture_pipeline.CaptureHooks` type (with
    #: it, ``capture`` is the kit's pipeline) or, for a backend that captures by tracing a
    #: program, its :class:`~torchlens.adapter_kit.program_capture.ProgramCaptureHooks` type
    #: (the kit's capture by program).
    capture_hooks: Optional[Union[Type[CaptureHooks], Type[ProgramCaptureHooks]]] = None

    #: The backend's :class:`~torchlens.adapter_kit.derived_grads.GradHooks` type (its
    #: framework's value-and-grad for the kit's gradient driver).
    grad_hooks_type: Optional[type] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own_capture = cls.__dict__.get("capture")
        if own_capture is None and "capture_hooks" in cls.__dict__:
            own_capture = BackendProtocol.capture
        if own_capture is None:
            return
        # Every capture passes the kit's preflight first (typed refusals before side effects);
        # one whose wrappers are process-wide takes its turn after that.
        checked = _preflighted(own_capture)
        cls.capture = takes_turns(checked) if cls.patches_process_wide else checked  # type: ignore[method-assign]

    # ---- module attribution --------------------------------------------------------------------

    #: What a module root of this framework is, as refusals name it ("a <framework>.nn.Layer root").
    module_root_description: str = "a module root"
    #: The framework's module class, where being an instance of it is what makes a module root.
    module_type: Optional[type] = None

    def is_module_root(self, model: Any) -> bool:
        """Whether ``model`` is a module whose submodules this backend attributes
        (``object_module``). The default: an instance of :attr:`module_type` (none without one)."""
        return self.module_type is not None and isinstance(model, self.module_type)

    #: The module identity mode of a module root when the request leaves it unset.
    module_mode: str = "object_module"

    def module_identity_mode(self, request: CaptureRequest) -> str:
        """The request's ``module_identity_mode``, resolved the same way on every backend:
        :attr:`module_mode` for a module root and ``function_root`` otherwise when unset; a
        module mode (anything but ``function_root``) asked of a root that is no module refuses
        (``option_unsupported``)."""
        mode = request.options.module_identity_mode
        module_root = self.is_module_root(request.model)
        if mode not in (None, "function_root") and not module_root:
            raise self.refuse(
                f"module_identity_mode={mode!r} needs {self.module_root_description}",
                "option_unsupported",
                "leave module_identity_mode unset for raw callables (function_root)",
            )
        if mode is None:
            return self.module_mode if module_root else "function_root"
        return mode

    # ---- derived gradients --------------------------------------------------------------------

    def grad_input(self, request: CaptureRequest, position: int) -> Any:
        """The input ``GradOptions.input_grad_argnums`` position ``position`` names (None when
        there is none). Positions count the call's positional arguments; a backend whose first
        argument is not an input (a parameter tree passed first) shifts them."""
        return request.args[position] if 0 <= position < len(request.args) else None

    def differentiable_input(self, value: Any) -> bool:
        """Whether derived gradients can be taken with respect to ``value``: a floating array of
        the framework (by its core dtype name; without an :attr:`array_type`, a floating host
        dtype)."""
        if self.array_type is not None:
            return isinstance(value, self.array_type) and is_floating_dtype(self.neutral_dtype(value))
        try:
            return self.to_numpy(value).dtype.kind in "fc"
        except Exception:
            return False

    def refuse(self, message: str, code: str, remedy: str) -> BackendUnsupportedError:
        """A typed refusal of this backend (``code`` from ``tl.backends.REFUSAL_CODES``)."""
        return BackendUnsupportedError(message, code, remedy, framework=self.name)

    # ---- identity ------------------------------------------------------------------------------

    @property
    def refusal_codes(self) -> Tuple[str, ...]:
        """The refusal codes this backend may raise, each in ``tl.backends.REFUSAL_CODES``: the
        codes the core assigns to this backend, the codes every preview backend shares, and the
        registry's option and capability codes (the gate's). Read from the core's closed set, so
        no backend keeps a list that could drift from it."""
        return tuple(
            code
            for code, (owner, _meaning) in refusal_codes().items()
            if owner in (self.name, "preview") or code in GATE_CODES
        )

    @property
    def name(self) -> str:
        """The backend's registered name."""
        return self.spec.name

    @property
    def requirement(self) -> Any:
        """The framework requirement of the backend's declaration."""
        return self.spec.requirement

    @property
    def capabilities(self) -> Mapping[str, bool]:
        """The capability table of the backend's declaration."""
        return self.spec.capabilities

    def runtime_name(self) -> str:
        """The framework's name as saved in a ``.tlspec`` manifest (its import name)."""
        return self.spec.requirement.module

    def runtime_version(self) -> str:
        """The installed framework's version (the same reading for every backend)."""
        return framework_version.runtime_version(self.spec.requirement.module)

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: Any) -> Any:
        """Runs one checked :class:`~torchlens.adapter_kit.CaptureRequest` and returns its
        :class:`~torchlens.trace.Trace` (built by :meth:`CaptureSession.finish`): the kit's
        pipeline over the backend's :attr:`capture_hooks` (capture by program for program
        hooks)."""
        hooks = self.make_capture_hooks(request)
        if isinstance(hooks, ProgramCaptureHooks):
            return run_program_capture(self, request, hooks)
        return run_capture(self, request, hooks)

    def make_capture_hooks(self, request: Any) -> Any:
        """This backend's :attr:`capture_hooks` for one request."""
        if self.capture_hooks is None:
            raise NotImplementedError(
                f"{type(self).__name__} names no capture_hooks and overrides no capture"
            )
        return self.capture_hooks(self, request)

    def make_grad_hooks(self, trace: Any, options: Any) -> Any:
        """This backend's :attr:`grad_hooks_type` for one trace (the gate refuses derived
        gradients to a backend without one before anything runs)."""
        if self.grad_hooks_type is None:
            raise NotImplementedError(f"{type(self).__name__} names no grad_hooks_type")
        return self.grad_hooks_type(trace, options)

    def cast(self, value: Any, dtype: str) -> Any:
        """``value`` converted to the core dtype ``dtype`` (the default loss sums outputs in
        float32). A backend whose derived gradients use the kit's default loss implements it."""
        raise NotImplementedError(f"{type(self).__name__} implements no cast")

    def holds_data(self, value: Any) -> bool:
        """Whether ``value`` holds data replay can compare (False for a shape-only value, such
        as a tensor on a ``meta`` device): validation of a trace with such values is
        ``unavailable`` (``values_not_materialized``), not failed."""
        return True

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        """The model's output computed with no TorchLens wrapper installed (the call itself; a
        backend overrides it where the framework needs a mode, such as no gradient tape)."""
        return model(*args, **kwargs)

    def output_leaves(self, output: Any) -> List[Any]:
        """The arrays of a returned structure, in the order the capture reports outputs (the
        arrays of :attr:`array_type` in :meth:`output_pairs`' order)."""
        return [array for _, array in self.output_pairs(output)]

    #: The framework's array type, by which the kit names a call's inputs and outputs
    #: (:meth:`input_pairs`, :meth:`output_pairs`).
    array_type: Optional[type] = None

    def input_pairs(self, args: tuple, kwargs: Mapping[str, Any]) -> List[Tuple[str, Any]]:
        """``(name, array)`` for every array among a call's arguments (``inputs.0``,
        ``inputs.mask``)."""
        return named_inputs(args, dict(kwargs), self.array_type)

    def output_pairs(self, output: Any, prefix: str = "output") -> List[Tuple[str, Any]]:
        """``(name, array)`` for every array of a returned structure (tuples, lists, dicts)."""
        return named_arrays(output, self.array_type, prefix)

    def reference_of(self, request: Any) -> Callable[[], List[Any]]:
        """What replay validation compares the trace's outputs with: the request's model run
        again with nothing installed, as output leaves. A request with live edits or an early
        stop is compared with the same call captured again under the same rules (an
        independent capture, nothing shared with this one)."""
        if request.interventions or request.stop_after is not None:

            def rerun() -> List[Any]:
                again = self.capture(dataclasses.replace(request, save=SaveRequest("all"), facets=None))
                return [op.out for op in again.outputs]

            return rerun
        model, args, kwargs = request.model, request.args, request.kwargs
        return lambda: self.output_leaves(self.reference_output(model, args, kwargs))

    def realize(self, values: List[Any]) -> List[Any]:
        """Evaluates lazy values in one framework evaluation (realize-once); eager frameworks
        return them as they are."""
        return values

    # ---- host copies ------------------------------------------------------------------------------

    @abstractmethod
    def to_numpy(self, value: Any) -> Any:
        """A host NumPy view of a value for comparison and diagnostics (dtypes NumPy lacks may
        widen, for example ``bfloat16`` to ``float32``)."""

    @abstractmethod
    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        """A framework array of logical dtype ``dtype`` (a core dtype name) from a NumPy array
        holding its values, or for bit-carried dtypes (``bfloat16``) their raw bits in the
        transport dtype (``uint16``). ``like``, when given, is a value whose framework-specific
        kind the result takes (a typed random key rebuilt from its key data)."""

    def neutral_dtype(self, value: Any) -> str:
        """The core's name for a value's dtype (``bfloat16`` survives a widening host view)."""
        return self.to_numpy(value).dtype.name

    def host_copy(self, value: Any) -> Any:
        """An independent host (NumPy) copy of a value."""
        import numpy  # lazy: importing torchlens imports no numpy

        return numpy.array(self.to_numpy(value), copy=True)

    # ---- replay hooks ---------------------------------------------------------------------------

    def run_op(self, record: Any, args: tuple, kwargs: dict) -> Any:
        """Runs one recorded op (a :class:`~torchlens.adapter_kit.replay.ReplayRecord`) on
        parent values and returns the value of the recorded output: the call's result, or its
        ``output_index``-th leaf of :meth:`output_leaves` (:meth:`output_at`)."""
        return self.output_at(record.call(*args, **kwargs), record.output_index)

    def output_at(self, result: Any, output_index: Optional[int]) -> Any:
        """The recorded output of an op's result (replay and the replay of an edited op): the
        result itself, or its ``output_index``-th leaf of :meth:`output_leaves`."""
        return result if output_index is None else self.output_leaves(result)[output_index]

    def replay_argument(self, value: Any) -> Any:
        """What replay passes for a saved value: a copy where the op might write into it."""
        return value

    def validation_status(self, trace: Any, outputs: Optional[List[Any]] = None) -> Any:
        """Replay validation (the shared driver over this adapter's hooks)."""
        return replay.validation_status(self, trace, outputs)

    def validate(self, trace: Any, outputs: Optional[List[Any]] = None) -> Any:
        """True/False when the validation status is final, otherwise the status itself."""
        return self.validation_status(trace, outputs).outcome()

    # ---- debug helpers ----------------------------------------------------------------------------

    def infer_input_shape(self, model: Any) -> Any:
        """A guess of the input ``model`` takes (``tl.debug.infer_input_shape``). The default
        refuses: only a backend that can read its framework's first layer overrides it."""
        raise BackendUnsupportedError(
            f"guessing an input shape reads the model's first layer; the {self.name} backend cannot",
            "capability_unsupported",
            "pass an example input yourself (tl.trace(model, x))",
            framework=self.name,
        )

    # ---- edits ----------------------------------------------------------------------------------

    def apply_action(self, action: Any, value: Any) -> Any:
        """The backend's one apply hook for :mod:`torchlens.edits` actions: the replacement of
        ``value``. The default computes framework-neutral actions on a host copy and converts
        back (keeping shape and dtype); a backend may override it with native array ops."""
        return action.apply(value, self)

    # ---- payload codec ------------------------------------------------------------------------------

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order, as a ``.tlspec`` stores them."""
        return array_codec.payload_bytes(array_codec.host_array(value))

    def payload_from_buffer(self, buffer: Any, offset: int, length: int, dtype: str, shape: list) -> Any:
        """A framework array over ``length`` bytes of ``buffer`` at ``offset`` (zero copy where
        the framework allows)."""
        return self.from_numpy(array_codec.array_from_buffer(buffer, offset, length, dtype, shape), dtype)

    def codec_metadata(self, trace: Any) -> dict:
        """Facts a reader needs to rebuild payloads (saved as the manifest's codec metadata)."""
        return {}

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Any:
        """Adjusts loaded payloads (for example re-applying a sharding); returns what was
        materialized, or None."""
        return None
