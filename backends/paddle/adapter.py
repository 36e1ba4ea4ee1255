"""The Paddle adapter: the backend protocol for PaddlePaddle (dygraph)."""

from __future__ import annotations

from typing import Any, Dict

from . import refusals

# Paddle crashes when first imported after TensorFlow: refuse before importing it.
refusals.check_import_order()

import numpy as np  # noqa: E402
import paddle  # noqa: E402

from torchlens.adapter_kit import BackendProtocol  # noqa: E402
from torchlens.adapter_kit.capture_pipeline import CaptureHooks  # noqa: E402
from torchlens.adapter_kit.host_conversions import HostConversions  # noqa: E402
from torchlens.adapter_kit.replay import ReplayRecord  # noqa: E402
from torchlens.adapter_kit.version_guard import VersionGuard  # noqa: E402

from .capture import Recorder, Tensor  # noqa: E402
from .dtypes import neutral_name, paddle_dtype  # noqa: E402
from .edits import LiveEdits, apply_natively  # noqa: E402
from .grads import GradHooks, GradOptions  # noqa: E402


class PaddleCapture(CaptureHooks):
    """The Paddle side of the kit's capture pipeline: wrapped kernels, tensor methods and
    ``Layer.__call__``; saved values are the model's own tensors, guarded by their versions."""

    live_edits_type = LiveEdits

    def check(self) -> None:
        refusals.root(self.model)

    def make_recorder(self) -> Recorder:
        recorder = Recorder(self.session, self.patches)
        versions = recorder.versions

        def hold(value_id: int, value: Any) -> Any:
            versions[value_id] = value._inplace_version()
            return value

        self.session.hold = hold
        return recorder

    def install(self) -> None:
        self.recorder.install(self.patches)

    def root_call_reported(self) -> bool:
        return self.mode == "object_module"  # Layer.__call__ reports the root layer's call

    def provenance(self) -> Dict[str, str]:
        return {"paddle_aliases": str(self.recorder.aliases)} if self.recorder.aliases else {}

    def payload_guard(self) -> VersionGuard:
        # Saved values are the model's own tensors; Paddle bumps a tensor's inplace version on
        # every in-place write.
        return VersionGuard(self.recorder.versions, Tensor._inplace_version)


class PaddleAdapter(HostConversions, BackendProtocol):
    """Fills the backend protocol for PaddlePaddle dygraph."""

    array_type = paddle.Tensor
    grad_options_type = GradOptions
    grad_hooks_type = GradHooks
    capture_hooks = PaddleCapture
    module_root_description = "a paddle.nn.Layer root"

    def is_module_root(self, model: Any) -> bool:
        return isinstance(model, paddle.nn.Layer)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        with paddle.no_grad():
            return model(*args, **kwargs)

    # ---- host copies (the kit's HostConversions over these) -------------------------------------

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def array_from_host(self, array: np.ndarray) -> Any:
        if array.dtype == np.uint16:
            array = array.view(np.int16)  # Paddle has no uint16: the same bits as int16
        return paddle.to_tensor(array)

    def cast(self, value: Any, dtype: str) -> Any:
        return value.astype(paddle_dtype(dtype))

    def reinterpret(self, value: Any, dtype: str) -> Any:
        return value.view(paddle_dtype("int16" if dtype == "uint16" else dtype))

    def apply_action(self, action: Any, value: Any) -> Any:
        """Zero-ablate, scale, add and replace-with computed natively on the tensor; a raw
        callable runs on the ``paddle.Tensor`` itself; other helpers compute on a host copy."""
        return apply_natively(self, action, value)

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        with paddle.no_grad():
            return super().run_op(record, args, kwargs)
