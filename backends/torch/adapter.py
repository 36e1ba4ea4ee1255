"""The torch adapter: the backend protocol for PyTorch."""

from __future__ import annotations

import dataclasses
from typing import Any, List

import torch

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, Patches
from torchlens.adapter_kit.array_codec import is_bit_carrier, transport_dtype
from torchlens.adapter_kit.live_edits import LiveEdits, StopSignal, check_patched_sites
from torchlens.adapter_kit.replay import ReplayRecord, ReplayRuntime, output_structure
from torchlens.adapter_kit.structures import substitute
from torchlens.adapter_kit.version_guard import VersionGuard
from torchlens.errors import BackendUnsupportedError

from . import grads, module_brackets
from .actions import apply_natively
from .backward import BackwardArming
from .capture import Capture, flatten
from .dtypes import BY_NAME, NAMES, name_of
from .freed_memory import keep_freed_memory
from .input_shape import infer_input_shape


def _version_of(tensor: torch.Tensor) -> int:
    # Saved values are the model's own tensors unless an in-place op inside the forward forced
    # a copy; a tensor's version counter moves on every in-place change.
    return tensor._version


class TorchAdapter(BackendProtocol):
    """Fills the backend protocol for PyTorch."""

    #: A function mode and module hooks that act on the capturing thread only.
    patches_process_wide = False
    grad_options_type = grads.GradOptions

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: CaptureRequest) -> Any:
        model, args, kwargs = request.model, request.args, request.kwargs
        keep_freed_memory()  # once per process: the next trace reuses this one's pages
        # Gradient-site rules (tl.when(tl.grad(...), action)) act in the backward pass; the live
        # edits of the forward see only the others.
        grad_rules = [rule for rule in request.interventions if rule.direction == "backward"]
        if grad_rules:
            request = dataclasses.replace(
                request,
                interventions=tuple(rule for rule in request.interventions if rule.direction != "backward"),
            )
        arming = None
        if BackwardArming.wanted(request.save_grads, request.options.backward_ready, grad_rules):
            arming = BackwardArming(request.save_grads, grad_rules, self)
        edits = LiveEdits(request, self, _refuse, framework="torch") if LiveEdits.wanted(request) else None
        with CaptureSession(request, self.payload_bytes) as session, Patches() as patches:
            capture = Capture(model, session, patches)
            capture.backward = arming
            capture.declare_model()
            capture.declare_inputs(args, kwargs)
            if edits is not None:
                edits.attach(session, capture)
                capture.edits = edits
            else:
                session.without_call_tracking()
            root_is_module = isinstance(model, torch.nn.Module)
            _report_module_calls(capture, patches, root_is_module)
            if not root_is_module:
                session.enter(0)
            stopped = False
            try:
                with capture.function_mode():
                    output = model(*args, **kwargs)
                if not root_is_module:
                    replaced = capture.exit(0, output)
                    output = output if replaced is None else replaced
            except StopSignal:
                stopped = True  # the frontier is marked; nothing past it ran
                output = None
            if not stopped:
                capture.declare_outputs(output)
            runtime = ReplayRuntime(
                records=capture.replays,
                reference=self.reference_of(request),
                params=capture.params,
                param_dtypes=capture.param_dtypes,
                request=request,
                output_structure=None if stopped else output_structure(self, output),
            )
            if edits is not None:
                edits.prepare_runtime(runtime, _apply, _output_of)
            trace = session.finish(
                self, runtime=runtime, payload_guard=VersionGuard(capture.versions, _version_of)
            )
        if arming is not None:
            arming.finish(trace, output, capture.param_tensors)
        else:
            # Without backward capture the trace keeps no autograd graph alive: the output's
            # tensors are detached aliases (no copy).
            trace.output = substitute(
                output, {id(tensor): tensor.detach() for _, tensor in flatten(output, "")}
            )
        if edits is not None:
            check_patched_sites(trace, edits)
        if request.options.grad_options is not None:
            trace.autograd = grads.derive(trace, request, self)
        return trace

    def differentiable_input(self, value: Any) -> bool:
        return grads.differentiable(value)

    def infer_input_shape(self, model: Any) -> Any:
        return infer_input_shape(model)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        with torch.no_grad():
            return model(*args, **kwargs)

    def output_leaves(self, output: Any) -> List[Any]:
        return [tensor for _, tensor in flatten(output, "")]

    def holds_data(self, value: Any) -> bool:
        return not getattr(value, "is_meta", False)

    # ---- host copies ----------------------------------------------------------------------------

    def to_numpy(self, value: torch.Tensor) -> Any:
        """A host NumPy view (bfloat16 and float8 widen to float32)."""
        value = value.detach().to("cpu")
        if value.dtype not in NAMES or NAMES[value.dtype].startswith(("bfloat16", "float8")):
            value = value.float()
        return value.resolve_conj().resolve_neg().numpy()

    def neutral_dtype(self, value: torch.Tensor) -> str:
        return name_of(value.dtype)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> torch.Tensor:
        torch_dtype = BY_NAME.get(dtype)
        if torch_dtype is None:
            transport_dtype(dtype)  # refuses a dtype the core does not list
            raise TypeError(f"torch {torch.__version__} has no dtype {dtype}")
        if is_bit_carrier(dtype) and array.dtype.kind == "u":
            # Raw bits of a dtype NumPy lacks (bfloat16 as uint16): reinterpret, no copy.
            return torch.from_numpy(array.view(array.dtype.str.replace("u", "i"))).view(torch_dtype)
        return torch.from_numpy(array).to(torch_dtype)

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        with torch.no_grad():
            result = record.call(*args, **kwargs)
        if record.func_name == "__setitem__":
            return args[0]
        return _output_of(result, record.output_index)

    def replay_argument(self, value: torch.Tensor) -> torch.Tensor:
        # A copy, so an in-place op re-run by replay cannot touch the saved value.
        return value.clone()

    def apply_action(self, action: Any, value: torch.Tensor) -> torch.Tensor:
        """Every action computed natively on the tensor (no host copy), shape and dtype kept."""
        return apply_natively(self, action, value)

    def patch_value(self, donor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """A patched-in value from another trace, on ``like``'s device and in its dtype."""
        return donor.detach().to(device=like.device, dtype=like.dtype).clone()

    # ---- payload codec ----------------------------------------------------------------------------

    def payload_bytes(self, tensor: torch.Tensor) -> memoryview:
        """The tensor's bytes in C order (bfloat16 and bool included), without a copy when the
        tensor is already contiguous on the CPU."""
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        return memoryview(flat.view(torch.uint8).numpy()).cast("B")


def _report_module_calls(capture: Capture, patches: Patches, root_is_module: bool) -> None:
    """Module calls reach the capture's module hooks through a bracket on each module of the
    model's tree (``module_brackets``: global hooks would send every module call down torch's
    slow path); a function root, whose modules are not known before the call, keeps global
    hooks. Both pass other threads' module calls through."""
    pre_hook, post_hook, native_hooks = capture.module_hooks()
    if root_is_module and module_brackets.can_bracket(capture.modules):
        patches.on_exit(module_brackets.install(capture.modules, pre_hook, post_hook, native_hooks))
        return
    hooks = torch.nn.modules.module
    pre = hooks.register_module_forward_pre_hook(pre_hook)
    patches.on_exit(pre.remove)
    post = hooks.register_module_forward_hook(post_hook)
    patches.on_exit(post.remove)


def _refuse(message: str, code: str, remedy: str) -> Exception:
    return BackendUnsupportedError(message, code, remedy, framework="torch")


def _apply(adapter: Any, action: Any, value: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return adapter.apply_action(action, value)


def _output_of(result: Any, output_index: Any) -> Any:
    if output_index is None:
        return result
    return [item for item in result if isinstance(item, torch.Tensor)][output_index]


__all__ = ["TorchAdapter"]
