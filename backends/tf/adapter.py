"""The TensorFlow adapter: the backend protocol for eager TensorFlow and Keras 3 (on the
TensorFlow Keras backend)."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf

from torchlens.adapter_kit import BackendProtocol, CaptureRequest
from torchlens.adapter_kit.capture_pipeline import CaptureHooks
from torchlens.adapter_kit.host_conversions import HostConversions
from torchlens.adapter_kit.program_capture import check_graph_only
from torchlens.adapter_kit.replay import replay_coverage

from . import guard, prescan, refusals
from .capture import EagerTensor, Recorder, is_keras_layer, is_module
from .dtypes import DENSE, neutral_name, tf_dtype
from .edits import LiveEdits, apply_natively
from .funcgraph import FuncGraphCapture
from .grads import GradHooks, GradOptions


class TFCapture(CaptureHooks):
    """The TensorFlow side of the kit's capture pipeline: an op callback, wrapped module calls,
    and the guard against writes and draws the structure does not show."""

    live_edits_type = LiveEdits

    def check(self) -> None:
        model, request = self.model, self.request
        prescan.keras_training_call(model, request.kwargs)
        self.built_here = _build_keras(model, request.args, request.kwargs)
        refusals.root(model)

    def last_check(self) -> None:
        # A write or a draw the model's structure does not show: one graph-mode trace of the
        # call (or, when it cannot be traced, the guard installed below).
        self.prescanned = prescan.eager_entry(self.model, self.request.args, self.request.kwargs)

    def make_recorder(self) -> Recorder:
        return Recorder(self.session)

    def install(self) -> None:
        self.recorder.install(self.patches, self.model if self.mode == "object_module" else None)
        guard.install(self.patches)

    def root_call_reported(self) -> bool:
        return self.mode == "object_module" and is_keras_layer(self.model)

    def provenance(self) -> Dict[str, str]:
        recorder = self.recorder
        facts = {"tf_prescan": self.prescanned}
        if self.built_here:
            facts["tf_built_before_capture"] = "true"
        # What replay can check: pure ops re-run through tf.raw_ops, and effect regions.
        facts.update(replay_coverage("tf", recorder.records, recorder.opaque, recorder.unresolved))
        return facts


class TFAdapter(HostConversions, BackendProtocol):
    """Fills the backend protocol for eager TensorFlow (Keras 3 layers, ``tf.Module`` and plain
    functions of ``tf.Tensor`` values)."""

    array_type = EagerTensor
    grad_options_type = GradOptions
    grad_hooks_type = GradHooks
    capture_hooks = TFCapture
    module_root_description = "a Keras layer or tf.Module root"

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: CaptureRequest) -> Any:
        """A graph-only entry (a ``tf.function`` or a Keras ``predict``) is captured from its
        traced graph by the kit's graph-only program capture (:class:`FuncGraphCapture`; what it
        cannot do refuses first); everything else runs through the kit's pipeline
        (:class:`TFCapture`)."""
        if refusals.is_graph_only(request.model):
            check_graph_only(self, request, refusals.GRAPH_ONLY)
        refusals.keras_backend(request.model)
        return super().capture(request)

    def make_capture_hooks(self, request: CaptureRequest) -> Any:
        if refusals.is_graph_only(request.model) and tf.executing_eagerly():
            return FuncGraphCapture(self, request)
        return TFCapture(self, request)

    def apply_action(self, action: Any, value: Any) -> Any:
        """Zero-ablate, scale and add computed natively on the tensor; a raw callable runs on
        the ``tf.Tensor`` itself."""
        return apply_natively(self, action, value)

    def is_module_root(self, model: Any) -> bool:
        return is_module(model)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        output = model(*args, **kwargs)
        if refusals.keras_predict_owner(model) is not None:
            # predict returns host NumPy arrays: compared as tensors.
            output = tf.nest.map_structure(tf.convert_to_tensor, output)
        return output

    # ---- host copies (the kit's HostConversions over these) -------------------------------------

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def array_from_host(self, array: np.ndarray) -> Any:
        return tf.constant(array)

    def cast(self, value: Any, dtype: str) -> Any:
        return tf.cast(value, tf_dtype(dtype))

    def reinterpret(self, value: Any, dtype: str) -> Any:
        return tf.bitcast(value, tf_dtype(dtype))

    def held_array(self, value: Any) -> Any:
        """A variable's current value (a tensor as it is)."""
        return value.read_value() if isinstance(value, tf.Variable) else value

    def payload_refusal(self, dtype: str) -> Optional[Exception]:
        """String, resource and variant payloads have no array encoding."""
        return None if dtype in DENSE else refusals.unencodable_payload(dtype)

    # ---- replay hooks -----------------------------------------------------------------------------

    def output_at(self, result: Any, output_index: Optional[int]) -> Any:
        """A raw op's result is a tensor or a list (or named tuple) of its outputs."""
        if not isinstance(result, (list, tuple)):
            return result
        return list(result)[output_index or 0]


def _build_keras(model: Any, args: tuple, kwargs: dict) -> bool:
    """Builds a Keras model that was never called, from the shape of its one tensor input,
    before the capture starts (as its first call would: creating its variables is not part of
    the traced forward). Returns whether it built the model; a model it cannot build this way
    is left as it is (and refuses in ``refusals.root``)."""
    keras = sys.modules.get("keras")
    if keras is None or not isinstance(model, keras.Layer) or model.built:
        return False
    tensors = [value for value in args if isinstance(value, tf.Tensor)]
    if kwargs or len(tensors) != 1 or len(args) != 1:
        return False
    try:
        model.build(tuple(tensors[0].shape))
    except Exception:
        return False
    return all(layer.built for layer in model._flatten_layers())
