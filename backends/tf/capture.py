"""One eager capture of a TensorFlow model. The real call runs with an op callback installed
(``tensorflow.python.framework.op_callbacks``): TensorFlow calls it after every eager op with
the op type, its input tensors, its attributes and its output tensors, so each op is recorded
with the values it actually produced and the branch the Python code actually took. Keras
``Layer.__call__`` and the ``__call__`` of every ``tf.Module`` class under the root are wrapped
for the call (owner thread only, always removed) to attribute ops to module calls.

Eager tensors are immutable, so a recorded value is the model's own tensor (no copy). A tensor an
op reads that no recorded op produced is a constant from outside the forward (a parentless
``constant`` op); ``ReadVariableOp`` of a declared variable is the parameter itself (no op).

Op callbacks are read-only (TensorFlow ignores a returned replacement in eager mode), so this
capture cannot change a value: ``intervene=`` and ``stop_after=`` refuse at the gate."""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import tensorflow as tf
from tensorflow.python.framework import op_callbacks, op_def_registry, ops

from torchlens.adapter_kit.module_walk import attributes_holding
from torchlens.adapter_kit.op_names import snake_case
from torchlens.adapter_kit.recorder import Recorder as KitRecorder
from torchlens.adapter_kit.replay import argument_template

from .dtypes import DENSE, KEPT, neutral_name
from .prescan import OP_TYPES

EagerTensor = type(tf.constant(0.0))

#: Op types that read a variable: the output is the variable's value (a parameter or a constant).
_READS = {"ReadVariableOp"}

#: Recorded names of some op types (otherwise the op type in snake case).
_NAMES = {
    "MatMul": "matmul",
    "BatchMatMulV2": "matmul",
    "BatchMatMulV3": "matmul",
    "AddV2": "add",
    "RealDiv": "div",
    "ConcatV2": "concat",
    "Conv2D": "conv2d",
    "DepthwiseConv2dNative": "depthwise_conv2d",
    "FusedBatchNormV3": "batch_norm",
    # Ops whose result does not depend on their input's values take the names replay
    # validation knows as value-independent (``tf.shape`` is torch's ``size``).
    "Shape": "size",
    "Size": "numel",
    "Rank": "dim",
    "ZerosLike": "zeros_like",
    "OnesLike": "ones_like",
}


def op_name(op_type: str) -> str:
    """The recorded function name of an op type (``Relu`` → ``relu``, ``BiasAdd`` → ``bias_add``,
    ``AddV2`` → ``add``, ``MatMul`` → ``matmul``)."""
    name = _NAMES.get(op_type)
    if name is not None:
        return name
    return snake_case(op_type)


def is_keras_layer(value: Any) -> bool:
    keras = sys.modules.get("keras")
    layer = getattr(keras, "Layer", None) if keras is not None else None
    return layer is not None and isinstance(value, layer)


def is_module(value: Any) -> bool:
    """A Keras layer (Keras 3 layers are not ``tf.Module``) or a ``tf.Module``."""
    return isinstance(value, tf.Module) or is_keras_layer(value)


def _children(node: Any) -> List[Tuple[str, Any]]:
    """Sub-modules of a Keras layer or ``tf.Module``: public attributes holding one (or a list,
    tuple or dict of them), in attribute order (one layer under two attributes is listed twice:
    the walk records the second as an alias), then tracked Keras sub-layers no attribute names
    (``layers.<index>``, as ``model.layers[index]`` in a Sequential or functional model)."""
    found = attributes_holding(node, is_module)
    if is_keras_layer(node):
        # A model's ``layers`` (what ``model.layers[i]`` names: a Sequential's input layer is
        # not listed), else the tracked sub-layers.
        seen = {id(value) for _, value in found}
        tracked = node.layers if hasattr(type(node), "layers") else getattr(node, "_layers", ())
        found += [(f"layers.{index}", layer) for index, layer in enumerate(tracked) if id(layer) not in seen]
    return found


def own_variables(node: Any) -> List[Tuple[str, Any]]:
    """``(name, tf.Variable)`` of the variables a layer or module owns itself."""
    if is_keras_layer(node):
        variables = list(node._trainable_variables) + list(node._non_trainable_variables)
        return [(variable.name, variable.value) for variable in variables]
    return attributes_holding(node, lambda value: isinstance(value, tf.Variable), (list, tuple))


class Recorder(KitRecorder):
    """Turns op callbacks and module calls into session events (the kit's recorder, with
    TensorFlow's op callback and variable reads)."""

    array_type = EagerTensor

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        #: id(variable handle) → the parameter's value id.
        self.handles: Dict[int, int] = {}
        self.opaque = 0
        #: Every eager tensor made from here on has a larger ``_id`` (TensorFlow's uid counter).
        self.first_uid = ops.uid()

    # ---- TensorFlow's facts -----------------------------------------------------------------------

    def dtype_of(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def shape_of(self, value: Any) -> Tuple[int, ...]:
        # A resource or variant handle has no array shape.
        return tuple(value.shape) if neutral_name(value.dtype) in KEPT else ()

    def same_dtype(self, new: Any, like: Any) -> Any:
        return new if new.dtype == like.dtype else tf.cast(new, like.dtype)

    def copy(self, value: Any) -> Any:
        return tf.identity(value)

    def module_children(self, module: Any) -> List[Tuple[str, Any]]:
        return _children(module)

    def owned_params(self, module: Any) -> List[Tuple[str, Any]]:
        return own_variables(module)

    def param(self, address: str, module_id: int, variable: Any) -> int:
        value_id = super().param(address, module_id, variable)
        self.handles[id(variable.handle)] = value_id
        return value_id

    def unresolved_producer(self, tensor: Any) -> bool:
        """A floating tensor with at least one dimension, made during the forward, that no
        recorded op produced: a value that left TensorFlow and came back
        (``tf.constant(x.numpy())``) or an op the callback could not see (callbacks are per
        thread). Scalars and integer tensors made in the forward are literals (Python numbers,
        shape arguments) and stay constants."""
        return (
            getattr(tensor, "_id", 0) > self.first_uid
            and tensor.dtype.is_floating
            and tensor.shape.rank is not None
            and tensor.shape.rank > 0
        )

    # ---- wrappers -----------------------------------------------------------------------------

    def install(self, patches: Any, model: Any) -> None:
        """Wraps ``keras.Layer.__call__`` and the ``__call__`` of every ``tf.Module`` class under
        the root (not the root's own: the adapter enters the root call itself), and adds the op
        callback; ``patches`` removes all of it."""
        keras = sys.modules.get("keras")
        if keras is not None:
            patches.wrap(keras.Layer, "__call__", self.module_call_wrapper)
        self.wrap_module_calls(patches, is_keras_layer)
        op_callbacks.add_op_callback(self.callback)
        patches.on_exit(lambda: op_callbacks.remove_op_callback(self.callback))

    # ---- ops ----------------------------------------------------------------------------------

    def callback(
        self,
        op_type: Any,
        inputs: Any,
        attrs: Any,
        outputs: Any,
        op_name: Optional[str] = None,
        graph: Any = None,
    ) -> None:
        """TensorFlow's op callback: one eager op has run (graph construction is ignored: a
        function called inside the forward is recorded as its one eager call op)."""
        if graph is None:
            op_type = op_type.decode() if isinstance(op_type, bytes) else op_type
            self.observed(self.record, op_type, list(inputs or ()), attrs, list(outputs or ()))
        return None

    def record(self, op_type: str, inputs: List[Any], attrs: Any, outputs: List[Any]) -> None:
        if op_type in _READS and inputs:
            value_id = self.handles.get(id(inputs[0]))
            if value_id is not None:
                # The declared variable's value: the parameter itself, not a new op.
                for tensor in outputs:
                    self.retag(value_id, tensor)
                return
            for tensor in outputs:
                self.declare_outside(tensor)  # a variable the root does not own: a constant
            return
        OP_TYPES.check((op_type,), "in the forward")
        func = op_name(op_type)
        attr_values = dict(zip(attrs[::2], attrs[1::2])) if attrs else {}
        call, kwargs = raw_op_call(op_type, inputs, attr_values.get, attr_values) or (None, {})
        args: tuple = ()
        if call is None:
            # An opaque region (replayed as unverified): its parents are its dense inputs.
            self.opaque += 1
            args = tuple(tensor for tensor in inputs if neutral_name(tensor.dtype) in DENSE)
        parents, _template, keywords = argument_template(args, kwargs, EagerTensor, self.reference)
        results = [(None if len(outputs) == 1 else index, tensor) for index, tensor in enumerate(outputs)]
        # Resource and variant handles have no value to keep; strings are kept (a .tlspec save
        # of one refuses: it has no array encoding).
        keep = all(neutral_name(tensor.dtype) in KEPT for tensor in outputs)
        attributes = [("tf_op_type", op_type)]
        described = self.report_op(func, call, parents, (), keywords, results, call is None, attributes, keep)
        # Live edits see each output (a replacement is made where an entry point returns it:
        # TensorFlow ignores what a callback returns).
        self.edited_outputs(func, None, described)


_SIGNATURES: Dict[str, Optional[Tuple[Any, Any, List[str]]]] = {}


def _raw_op(op_type: str) -> Optional[Tuple[Any, Any, List[str]]]:
    """``(tf.raw_ops function, OpDef, accepted keyword names)`` of a pure op, or None."""
    if op_type in _SIGNATURES:
        return _SIGNATURES[op_type]
    found = None
    op_def = op_def_registry.get(op_type)
    function = getattr(tf.raw_ops, op_type, None)
    if op_def is not None and function is not None and not op_def.is_stateful:
        try:
            accepted = list(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            accepted = []
        if len(accepted) > len(op_def.input_arg):
            found = (function, op_def, accepted)
    _SIGNATURES[op_type] = found
    return found


def raw_op_call(
    op_type: str, inputs: List[Any], attr: Callable[[str], Any], attr_names: Iterable[str]
) -> Optional[Tuple[Callable[..., Any], Dict[str, Any]]]:
    """How one op re-runs through ``tf.raw_ops``: the function and its keyword arguments, named
    by its OpDef (``attr(name)`` reads one of the op's attributes ``attr_names``), or None for a
    stateful or unknown op (an opaque region)."""
    found = _raw_op(op_type)
    if found is None:
        return None
    function, op_def, accepted = found
    # The Python names of the inputs (``Sum``'s ``reduction_indices`` is ``axis``) come first in
    # the signature, in OpDef order.
    names = accepted[: len(op_def.input_arg)]
    kwargs: Dict[str, Any] = {}
    position = 0
    for arg, name in zip(op_def.input_arg, names):
        if arg.number_attr or arg.type_list_attr:
            number = arg.number_attr
            count = int(attr(number) or 0) if number else len(attr(arg.type_list_attr) or ())
            kwargs[name] = list(inputs[position : position + count])
            position += count
        else:
            kwargs[name] = inputs[position] if position < len(inputs) else None
            position += 1
    if position != len(inputs):
        return None
    for name in attr_names:
        if name in accepted and name not in kwargs:
            kwargs[name] = _attr(attr(name))
    return function, kwargs


def _attr(value: Any) -> Any:
    """An attribute value as ``tf.raw_ops`` takes it (dtypes as ``tf.DType``, bytes as str)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return [_attr(item) for item in value]
    return value
