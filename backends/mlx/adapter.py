"""The MLX adapter: the backend protocol for MLX."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from torchlens.adapter_kit import BackendProtocol
from torchlens.adapter_kit.capture_pipeline import CallRuntime, CaptureHooks
from torchlens.adapter_kit.host_conversions import HostConversions
from torchlens.adapter_kit.live_edits import LiveEdits
from torchlens.adapter_kit.module_walk import ModuleTree, install_module_calls
from torchlens.edits import actions
from torchlens.edits.actions import _shape_kept

from . import refusals
from .capture import TRANSFORMED, Recorder
from .dtypes import mlx_dtype, neutral_name
from .grads import GradHooks, GradOptions
from .modules import discover


@dataclass
class MlxRuntime(CallRuntime):
    """Runtime-only data of a live trace: the kit's, plus what derived gradients read again
    (the module tree, and the capture's structural signature and value ids in order)."""

    tree: Any = None
    order: List[Any] = field(default_factory=list)
    order_ids: List[int] = field(default_factory=list)


class MlxCapture(CaptureHooks):
    """The MLX side of the kit's capture pipeline: wrapped ``mx`` functions, array methods and
    the calls of the root's modules, the kit's live edits, evaluated once."""

    runtime_type = MlxRuntime
    live_edits_type = LiveEdits

    # The wrappers hold lazy arrays: a predicate on a value would evaluate mid-forward.
    lazy_values = True

    def check(self) -> None:
        refusals.check_root(self.model)

    def make_recorder(self) -> Recorder:
        return Recorder(self.session, self.request.options.extra.get(refusals.ON_UNWRAPPED, "warn"))

    def declare_modules(self) -> None:
        model, recorder = self.model, self.recorder
        tree = discover(model) if self.adapter.is_module_root(model) else ModuleTree()
        if self.mode == "object_module":
            recorder.declare_tree(tree)
        else:
            super().declare_modules()
            # The root-only surface: no submodules, every parameter belongs to the root.
            params = [(address, 0, array, trainable) for address, _, array, trainable in tree.params]
            tree = ModuleTree(tree.modules[:1], params, {id(model): 0})
        self.tree = tree
        self.objects = [record.obj for record in tree.modules if not record.container]
        recorder.defer_params(tree.params)
        recorder.scan_outside([model] + self.objects)

    def install(self) -> None:
        patches, recorder = self.patches, self.recorder
        recorder.install(patches)
        patches.rebind_held(self.objects)
        install_module_calls(patches, self.tree, recorder.module_call)
        transformed = refusals.gc_func_type()
        for owner, name in recorder.transforms:
            # MLX's own compiled helpers are wrapped by name already (nn.gelu is an op).
            if isinstance(getattr(owner, name), transformed):
                patches.wrap(owner, name, recorder.op_wrapper(name, TRANSFORMED))

    def exit_root(self, output: Any) -> Any:
        for _, array in self.adapter.output_pairs(output):
            self.recorder.id_of(array)  # an output no op produced is declared before the exit
        self.recorder.declare_remaining()
        return super().exit_root(output)

    def ceilings(self) -> List[str]:
        return list(self.recorder.ceilings)

    def runtime_fields(self) -> Dict[str, Any]:
        recorder = self.recorder
        return {"tree": self.tree, "order": recorder.order, "order_ids": recorder.order_ids}


class MlxAdapter(HostConversions, BackendProtocol):
    """Fills the backend protocol for MLX."""

    array_type = mx.array
    grad_options_type = GradOptions
    grad_hooks_type = GradHooks
    capture_hooks = MlxCapture
    module_type = nn.Module
    module_root_description = "an mlx.nn.Module root"

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        output = model(*args, **kwargs)
        self.realize(self.output_leaves(output))
        return output

    def realize(self, values: List[Any]) -> List[Any]:
        """Evaluates lazy arrays in one ``mx.eval`` (realize-once). A value that cannot be
        evaluated was recorded inside a transform (a tracer): that refuses."""
        try:
            mx.eval(*[value for value in values if isinstance(value, mx.array)])
        except RuntimeError as error:
            raise refusals.refuse(
                "a transformed function (mx.compile, mx.grad, mx.vmap) ran inside the forward "
                f"where no wrapper could route it, so tracers were recorded ({str(error)[:80]})",
                "mlx_transform_at_entry",
                "call the transformed function from a module attribute or a module global, or "
                "move the transform outside the traced call",
            ) from None
        return values

    # ---- host copies (the kit's HostConversions over these) -------------------------------------

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype) if isinstance(value, mx.array) else np.asarray(value).dtype.name

    def array_to_host(self, value: Any) -> np.ndarray:
        return np.array(value)

    def array_from_host(self, array: np.ndarray) -> Any:
        return mx.array(array)

    def cast(self, value: Any, dtype: str) -> Any:
        return value.astype(mlx_dtype(dtype))

    def reinterpret(self, value: Any, dtype: str) -> Any:
        return value.view(mlx_dtype(dtype))

    # ---- edits ----------------------------------------------------------------------------------

    def apply_action(self, action: Any, value: Any) -> Any:
        """Applies an edit action with MLX's own lazy ops (nothing is evaluated mid-forward,
        so realize-once holds); the result keeps the value's shape and dtype."""
        if isinstance(action, actions.ZeroAblate):
            result = mx.zeros_like(value)
        elif isinstance(action, actions.Scale):
            result = value * action.factor
        elif isinstance(action, actions.Add):
            result = value + _as_mlx(action.delta)
        elif isinstance(action, actions.Clamp):
            result = mx.clip(value, action.min, action.max)
        elif isinstance(action, actions.MeanAblate):
            whole = action.source is not None
            source = _as_mlx(action.source) if whole else value
            mean = source.astype(mx.float32).mean(axis=None if whole else action.dim, keepdims=not whole)
            result = mx.broadcast_to(mean, value.shape)
        elif isinstance(action, actions.ReplaceWith):
            replacement = _as_mlx(action.value() if callable(action.value) else action.value)
            try:
                result = mx.broadcast_to(replacement, value.shape)
            except ValueError:
                result = replacement  # the shape check below refuses it
        else:  # a callable on the mx.array itself, or another helper's own apply
            result = action.apply(value, self)
        result = _as_mlx(result)
        _shape_kept(action.describe(), value, result)
        return result if result.dtype == value.dtype else result.astype(value.dtype)


def _as_mlx(value: Any) -> Any:
    """An ``mx.array`` of a number, a NumPy array or an ``mx.array``."""
    if isinstance(value, mx.array):
        return value
    return mx.array(np.asarray(value))
