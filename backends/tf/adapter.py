"""The TensorFlow adapter: the backend protocol for eager TensorFlow and Keras 3 (on the
TensorFlow Keras backend)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, List

import numpy as np
import tensorflow as tf

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, Patches
from torchlens.adapter_kit.array_codec import is_bit_carrier
from torchlens.adapter_kit.replay import ReplayRecord, ReplayRuntime

from . import guard, prescan, refusals
from .capture import EagerTensor, Recorder, is_keras_layer, is_module, tensors_of
from .dtypes import DENSE, neutral_name, tf_dtype
from .grads import GradOptions, derive


@dataclass
class TFRuntime(ReplayRuntime):
    """Runtime-only data of a live trace (never saved): what replay reads."""

    model: Any = None
    args: tuple = ()
    kwargs: Any = None
    param_addresses: Any = None


class TFAdapter(BackendProtocol):
    """Fills the backend protocol for eager TensorFlow (Keras 3 layers, ``tf.Module`` and plain
    functions of ``tf.Tensor`` values)."""

    refusal_codes = refusals.CODES
    array_type = EagerTensor
    patches_process_wide = True
    grad_options_type = GradOptions
    module_root_description = "a Keras layer or tf.Module root"

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: CaptureRequest) -> Any:
        options = request.options
        model = request.model
        grad_options = options.grad_options
        if grad_options is not None:
            if refusals.is_graph_only(model):
                raise refusals.graph_only_grad()
        refusals.keras_backend(model)
        if refusals.is_graph_only(model) and tf.executing_eagerly():
            if request.interventions or request.stop_after is not None:
                raise refusals.graph_only_intervene()
            if options.module_identity_mode == "object_module":
                raise refusals.option(
                    "graph-only entries have no module attribution (function_root only)",
                    "leave module_identity_mode unset for a graph-only entry",
                )
            from .funcgraph import capture as capture_graph

            return capture_graph(self, request, TFRuntime)
        prescan.keras_training_call(model, request.kwargs)
        built_here = _build_keras(model, request.args, request.kwargs)
        refusals.root(model)
        mode = self.module_identity_mode(request)
        edits = None
        if request.interventions or request.stop_after is not None:
            from .edits import LiveEdits

            edits = LiveEdits(request, self)
        # A write or a draw the model's structure does not show: one graph-mode trace of the
        # call after every other check and before it runs (or, when it cannot be traced, the
        # guard installed below).
        prescanned = prescan.eager_entry(model, request.args, request.kwargs)
        with CaptureSession(request) as session, Patches() as patches:
            recorder = Recorder(session)
            if mode == "object_module":
                recorder.declare_modules(model)
            else:
                name = getattr(model, "__name__", type(model).__name__)
                session.module(0, ["self"], name, False, False)
                recorder.module_ids[id(model)] = 0
            session.extra("provenance.module_identity_mode", mode)
            session.extra("provenance.tf_prescan", prescanned)
            session.extra("provenance.param_source", "module" if recorder.params else "none")
            if built_here:
                session.extra("provenance.tf_built_before_capture", "true")
            for name, tensor in self.input_pairs(request.args, request.kwargs):
                recorder.input(name, tensor)
            if edits is not None:
                edits.attach(session, recorder, patches)
            recorder.install(patches, model if mode == "object_module" else None)
            guard.install(patches)
            root_wrapped = mode == "object_module" and is_keras_layer(model)
            if not root_wrapped:
                session.enter(0)
            try:
                output = model(*request.args, **request.kwargs)
            except Exception as error:
                # Keras re-raises what a layer's call raised as a RuntimeError: a refusal raised
                # inside the forward surfaces as itself.
                if recorder.error is not None and recorder.error is not error:
                    raise recorder.error from error
                raise
            if not root_wrapped:
                output = recorder.exit(0, output)
            patches.restore_all()
            for name, tensor in self.output_pairs(output):
                session.output(name, recorder.id_of(tensor))
            if recorder.opaque:
                session.extra("provenance.tf_opaque_ops", str(recorder.opaque))
            if recorder.unresolved:
                session.extra("provenance.tf_unresolved_producers", str(len(recorder.unresolved)))
            # What replay can check: pure ops re-run through tf.raw_ops, and effect regions.
            session.extra(
                "provenance.tf_replayable_ops",
                str(sum(1 for record in recorder.records.values() if not record.opaque)),
            )
            runtime = TFRuntime(
                records=recorder.records,
                reference=self.reference_of(request),
                params=recorder.params,
                param_dtypes=recorder.param_dtypes,
                values=recorder.values,
                model=model,
                args=request.args,
                kwargs=request.kwargs,
                param_addresses=recorder.param_addresses,
                unresolved=recorder.unresolved,
            )
            if edits is not None:
                edits.prepare_runtime(runtime)
            trace = session.finish(self, runtime=runtime)
        trace.options = dataclasses.replace(options, module_identity_mode=mode)
        if grad_options is not None:
            trace.autograd = derive(trace, grad_options)
        return trace

    def apply_action(self, action: Any, value: Any) -> Any:
        """Zero-ablate, scale and add computed natively on the tensor; a raw callable runs on
        the ``tf.Tensor`` itself."""
        from .edits import apply_natively

        return apply_natively(self, action, value)

    def is_module_root(self, model: Any) -> bool:
        return is_module(model)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        output = model(*args, **kwargs)
        if refusals.keras_predict_owner(model) is not None:
            # predict returns host NumPy arrays: compared as tensors.
            output = tf.nest.map_structure(tf.convert_to_tensor, output)
        return output

    def output_leaves(self, output: Any) -> List[Any]:
        return tensors_of(output)

    # ---- host copies ----------------------------------------------------------------------------

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host NumPy array of a tensor or variable; bfloat16 widens to float32."""
        if isinstance(value, tf.Variable):
            value = value.read_value()
        if not isinstance(value, EagerTensor):
            return np.asarray(value)
        if value.dtype == tf.bfloat16:
            value = tf.cast(value, tf.float32)
        return value.numpy()

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        if is_bit_carrier(dtype) and array.dtype.kind == "u":
            # Raw bits of a dtype NumPy lacks (bfloat16 travels as uint16): reinterpret them.
            bits = tf.constant(np.ascontiguousarray(array))
            return tf.bitcast(bits, tf_dtype(dtype))
        if dtype == "bfloat16":
            return tf.cast(tf.constant(np.asarray(array, dtype=np.float32)), tf.bfloat16)
        return tf.constant(np.array(array, dtype=np.dtype(dtype), order="C"))

    # ---- payload codec ----------------------------------------------------------------------------

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order (bfloat16 as its raw bits); string, resource and variant
        payloads refuse."""
        from torchlens.adapter_kit.array_codec import payload_bytes

        if isinstance(value, tf.Variable):
            value = value.read_value()
        dtype = neutral_name(value.dtype)
        if dtype not in DENSE:
            raise refusals.unencodable_payload(dtype)
        if dtype == "bfloat16":
            return payload_bytes(tf.bitcast(value, tf.uint16).numpy())
        return payload_bytes(value.numpy())

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Any:
        """Every payload loads back as a ``tf.Tensor``."""
        return {label: "value" for label in labels.values()}

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        result = record.call(*args, **kwargs)
        if record.output_index is None:
            if isinstance(result, (list, tuple)):
                return result[0]
            return result
        return list(result)[record.output_index]


def _build_keras(model: Any, args: tuple, kwargs: dict) -> bool:
    """Builds a Keras model that was never called, from the shape of its one tensor input,
    before the capture starts (as its first call would: creating its variables is not part of
    the traced forward). Returns whether it built the model; a model it cannot build this way
    is left as it is (and refuses in ``refusals.root``)."""
    import sys

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
