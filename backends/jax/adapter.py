"""The JAX adapter: the backend protocol for JAX."""

from __future__ import annotations

from typing import Any, List, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession
from torchlens.adapter_kit.array_codec import is_bit_carrier, payload_bytes
from torchlens.adapter_kit.program_capture import ProgramCaptureHooks
from torchlens.adapter_kit.replay import ReplayRecord

from . import jaxpr_cache, refusals
from .capture import Capture, as_array
from .dtypes import is_key, neutral_name
from .grads import GradHooks, GradOptions, inexact
from .modules import module_root
from .payloads import codec_metadata, finish_load, numpy_dtype
from .roots import Root, check_root, framework_of


class JaxCapture(ProgramCaptureHooks):
    """The JAX side of the kit's capture by program: the call over its pytree leaves, traced to
    a jaxpr once per signature, checked, then walked by :class:`~.capture.Capture`."""

    param_source = "pytree-derived"

    def split(self) -> Root:
        request = self.request
        model, mode = request.model, self.adapter.module_identity_mode(request)
        framework = framework_of(model)
        if framework is None:
            return Root.of_function(model, request.args, request.kwargs)
        return module_root(model, framework, request.args, request.kwargs, attribute=mode != "function_root")

    def check(self, root: Any) -> None:
        check_root(self.request.model, root.leaves)
        if self.request.options.grad_options is not None and root.framework == "flax_nnx":
            raise refusals.refuse(
                "derived gradients of Flax modules are not available yet",
                "capability_unsupported",
                "trace a raw function fn(params, *inputs) over the module's state instead",
            )

    lookup = staticmethod(jaxpr_cache.lookup)

    def program(self, entry: Any) -> Tuple[Any, Any, Any]:
        closed, output_shape = entry.traced
        return closed.jaxpr, closed.consts, output_shape

    def check_key(self, root: Any) -> Tuple[str, bool]:
        return self.request.options.jax_control_flow, root.kind == "pytree_module"

    def check_program(self, body: Any, key: Any) -> None:
        refusals.check(body, key[0], attributed=key[1])

    def check_constants(self, values: Any) -> None:
        refusals.check_constants(values)

    def make_walk(self, session: CaptureSession, entry: Any) -> Capture:
        options = self.request.options
        return Capture(session, options.jax_control_flow, options.jax_max_control_flow_unroll, entry)


class JaxAdapter(BackendProtocol):
    """Fills the backend protocol for JAX."""

    #: The capture interprets the traced program; nothing process-wide is replaced.
    patches_process_wide = False

    module_root_description = "an Equinox or Flax NNX module root"
    module_mode = "pytree_module"

    grad_options_type = GradOptions
    grad_hooks_type = GradHooks
    capture_hooks = JaxCapture

    def is_module_root(self, model: Any) -> bool:
        return framework_of(model) is not None

    def grad_input(self, request: CaptureRequest, position: int) -> Any:
        return Root.input_argument(request.args, position, framework_of(request.model) is None)

    def differentiable_input(self, value: Any) -> bool:
        # An input may be a pytree: it can be differentiated when one of its leaves can.
        return any(inexact(leaf) for leaf in jax.tree_util.tree_leaves(value))

    def output_leaves(self, output: Any) -> List[Any]:
        return [as_array(leaf) for leaf in jax.tree_util.tree_leaves(output)]

    # ---- host copies ----------------------------------------------------------------------------

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host NumPy view (typed keys as their key data)."""
        if is_key(value.dtype):
            value = jax.random.key_data(value)
        return np.asarray(value)

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        if like is not None and is_key(like.dtype):
            # A typed PRNG key travels as its key data: rebuild a key of the same implementation.
            data = jnp.asarray(array.astype(numpy_dtype(dtype), copy=False))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(like))
        target = numpy_dtype(dtype)
        if is_bit_carrier(dtype) and array.dtype.kind == "u":
            # Raw bits of a dtype NumPy lacks natively (bfloat16 travels as uint16).
            return jnp.asarray(array.view(target))
        return jnp.asarray(array.astype(target, copy=False))

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        return as_array(record.call(*args, **kwargs)[record.output_index])

    # ---- payload codec ----------------------------------------------------------------------------

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order: a typed PRNG key as its key data, a sharded array
        assembled on the host."""
        return payload_bytes(self.to_numpy(value))

    def codec_metadata(self, trace: Any) -> dict:
        return codec_metadata(trace)

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Any:
        return finish_load(payloads, labels, codec, hints)
