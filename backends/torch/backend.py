"""The torch backend object the registry hands out."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torchlens._core import core
from torchlens.options import CaptureOptions
from torchlens.selectors import Selector
from torchlens.trace import Trace, warn_matched_nothing

from .capture import ID_ATTRIBUTE, Capture, _flatten, _RecordingMode
from .dtypes import BY_NAME, NAMES


class _VersionGuard:
    """Saved values are the model's own tensors unless an in-place op inside the forward forced
    a copy. A tensor's version counter moves on every in-place change, so a value changed
    after the capture is refused instead of served as what the model computed."""

    __slots__ = ("versions",)

    def __init__(self, versions: dict) -> None:
        self.versions = versions

    def __call__(self, slot: int, value: torch.Tensor) -> None:
        expected = self.versions.get(slot)
        if expected is not None and value._version != expected:
            from torchlens.errors import PayloadModifiedError

            raise PayloadModifiedError(
                "this saved value was modified in place after the capture",
                "payload_modified_after_capture",
                "clone tensors returned by the model before changing them in place, or trace again",
            )


class Runtime:
    """Runtime-only replay data of a live trace (never saved to a file)."""

    __slots__ = ("model", "args", "kwargs", "replays")

    def __init__(self, model: Any, args: tuple, kwargs: dict, replays: dict) -> None:
        self.model, self.args, self.kwargs, self.replays = model, args, kwargs, replays


class TorchBackend:
    """Fills the backend contract for PyTorch."""

    name = "torch"

    def detect(self, model: Any, inputs: Any) -> bool:
        """A torch module, or a callable given torch tensors."""
        if isinstance(model, torch.nn.Module):
            return True
        values = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
        return callable(model) and any(isinstance(value, torch.Tensor) for value in values)

    def runtime_name(self) -> str:
        return "torch"

    def runtime_version(self) -> str:
        return torch.__version__

    # ---- payloads ----------------------------------------------------------------------------

    def to_numpy(self, tensor: torch.Tensor) -> Any:
        """A host NumPy view for diagnostics (bfloat16 and float8 widen to float32)."""
        value = tensor.detach().to("cpu")
        if value.dtype not in NAMES or NAMES[value.dtype].startswith(("bfloat16", "float8")):
            value = value.float()
        return value.numpy()

    def payload_bytes(self, tensor: torch.Tensor) -> memoryview:
        """The tensor's bytes in C order (bfloat16 and bool included), without a copy when the
        tensor is already contiguous on the CPU."""
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        return memoryview(flat.view(torch.uint8).numpy()).cast("B")

    def payload_from_buffer(
        self, buffer: Any, offset: int, length: int, dtype: str, shape: list
    ) -> torch.Tensor:
        """A zero-copy tensor over ``length`` bytes of ``buffer`` at ``offset``."""
        torch_dtype = BY_NAME.get(dtype)
        if torch_dtype is None:
            raw = torch.frombuffer(buffer, dtype=torch.uint8, count=length, offset=offset)
            return raw
        if length == 0:
            return torch.empty(shape, dtype=torch_dtype)
        item = torch.empty((), dtype=torch_dtype).element_size()
        flat = torch.frombuffer(buffer, dtype=torch_dtype, count=length // item, offset=offset)
        return flat.reshape(shape)

    # ---- capture -------------------------------------------------------------------------

    def trace(
        self,
        model: Any,
        inputs: Any,
        kwargs: Optional[dict],
        save: Any,
        options: CaptureOptions,
        intervene: Any = None,
        stop_after: Any = None,
    ) -> Trace:
        from torchlens.backends import gate, gate_capture_request, get_spec

        spec = get_spec(self.name)
        # Refusals come before any side effect: nothing is installed, the model does not run.
        selector: Optional[Selector] = gate_capture_request(spec, save, intervene, stop_after)
        if options.grad_options is not None:
            gate(spec, "derived_grads")
        if options.module_identity_mode not in (None, "object_module"):
            from torchlens.errors import BackendUnsupportedError

            raise BackendUnsupportedError(
                f"module_identity_mode={options.module_identity_mode!r} is not a torch mode",
                "option_unsupported",
                "torch models always use object_module attribution; leave the option unset",
                framework="torch",
            )
        args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        kwargs = dict(kwargs or {})
        save_all = save is None or save is True
        native_core = core()
        plan = selector.arena() if selector is not None else None
        session = native_core.start_session(
            options.recurrence_detection, options.compute_input_output_distances, plan
        )
        capture = Capture(model, session, save_all=save_all, live_plan=selector is not None)
        mode = _RecordingMode(capture)
        pre_handle = post_handle = None
        try:
            capture.declare_model()
            capture.declare_inputs(args, kwargs)
            pre_handle = torch.nn.modules.module.register_module_forward_pre_hook(capture.pre_hook)
            post_handle = torch.nn.modules.module.register_module_forward_hook(capture.post_hook)
            if not isinstance(model, torch.nn.Module):
                session.enter(0)
            with mode:
                output = model(*args, **kwargs)
            if not isinstance(model, torch.nn.Module):
                pending = []
                _flatten(output, "", pending)
                session.exit(0, [getattr(t, ID_ATTRIBUTE) for _, t in pending if hasattr(t, ID_ATTRIBUTE)])
        except BaseException:
            session.abandon()
            capture.untag()
            raise
        finally:
            if pre_handle is not None:
                pre_handle.remove()
            if post_handle is not None:
                post_handle.remove()
        try:
            capture.declare_outputs(output)
            native_trace, decisions = session.finish()
            capture.apply(decisions)
        finally:
            capture.untag()
            returned = []
            _flatten(output, "", returned)
            for _, tensor in returned:
                if hasattr(tensor, ID_ATTRIBUTE):
                    delattr(tensor, ID_ATTRIBUTE)
        if selector is not None:
            keep = sorted(
                op
                for op, slot in enumerate(capture.op_slots)
                if slot is not None and (op in capture.selected or slot in capture.constant_slots)
            )
            if not capture.selected:
                warn_matched_nothing(selector)
            native_trace.keep_payloads(keep)
            kept_slots = {capture.op_slots[op] for op in keep}
            capture.payloads = {slot: value for slot, value in capture.payloads.items() if slot in kept_slots}
        elif not save_all:
            native_trace.keep_payloads([])
            capture.payloads = {}
        runtime = Runtime(model, args, kwargs, capture.replays)
        trace = Trace(
            native_trace,
            capture.payloads,
            self,
            runtime=runtime,
            payload_guard=_VersionGuard(capture.versions),
        )
        if not trace.capture_verified:
            import warnings

            from torchlens.errors import CaptureUnverifiedWarning

            warnings.warn(
                f"the capture may be incomplete: {trace.capture_reason}",
                CaptureUnverifiedWarning,
                stacklevel=3,
            )
        return trace

    def validate(self, trace: Trace, outputs: Any = None) -> Any:
        from .replay import validate

        return validate(trace, outputs)

    def validation_status(self, trace: Trace, outputs: Any = None) -> Any:
        from .replay import validation_status

        return validation_status(trace, outputs)


BACKEND = TorchBackend()


def _reference_output(model: Any, inputs: Any, kwargs: Optional[dict] = None) -> Any:
    """The model's output computed with no TorchLens wrapper installed."""
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    with torch.no_grad():
        return model(*args, **(kwargs or {}))


def _host_copy(value: torch.Tensor) -> torch.Tensor:
    return value.detach().to("cpu").clone()


def _protocol():
    from torchlens.backends.contract import BackendProtocol
    from torchlens.backends.torch_spec import TORCH_SPEC

    return BackendProtocol(
        requirement=TORCH_SPEC.requirement,
        capabilities=TORCH_SPEC.capabilities,
        capture=BACKEND.trace,
        validate=BACKEND.validate,
        reference_output=_reference_output,
        host_copy=_host_copy,
        realize=lambda values: values,
        refusal_codes=(
            "intervene_unsupported",
            "stop_after_unsupported",
            "value_dependent_save_unsupported",
            "followed_by_unsupported",
        ),
        adapter=BACKEND,
    )


PROTOCOL = _protocol()
