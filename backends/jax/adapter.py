"""The JAX adapter: the backend protocol for JAX."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

import jax
import jax.numpy as jnp
import numpy as np

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession
from torchlens.adapter_kit.array_codec import is_bit_carrier, payload_bytes
from torchlens.adapter_kit.replay import ReplayRecord, ReplayRuntime
from torchlens.options import CaptureOptions

from . import jaxpr_cache, refusals
from .capture import Capture, as_array
from .dtypes import is_key, neutral_name
from .grads import GradOptions, derive, inexact
from .modules import module_root
from .payloads import codec_metadata, finish_load, numpy_dtype
from .roots import Root, check_root, framework_of, path_name, raw_root


@dataclass
class JaxRuntime(ReplayRuntime):
    """Runtime-only data of a live trace (never saved): what replay reads, plus the traced call
    and the output structure derived gradients re-run."""

    root: Any = None
    capture: Any = None
    output_tree: Any = None


class JaxAdapter(BackendProtocol):
    """Fills the backend protocol for JAX."""

    #: The capture interprets the traced program; nothing process-wide is replaced.
    patches_process_wide = False

    grad_options_type = GradOptions

    # ---- capture -------------------------------------------------------------------------------

    def capture(self, request: CaptureRequest) -> Any:
        options = request.options
        grad_options = options.grad_options
        model = request.model
        root = self._root(model, request.args, request.kwargs, options)
        check_root(model, root.leaves)
        if grad_options is not None and root.framework == "flax_nnx":
            raise refusals.refuse(
                "derived gradients of Flax modules are not available yet",
                "capability_unsupported",
                "trace a raw function fn(params, *inputs) over the module's state instead",
            )
        # Refusals come before the capture starts: the jaxpr is read, no equation runs.
        entry = jaxpr_cache.lookup(root)
        closed, output_shape = entry.traced
        checked = (options.jax_control_flow, root.kind == "pytree_module")
        if checked not in entry.checked:
            refusals.check(closed.jaxpr, checked[0], attributed=checked[1])
            entry.checked.add(checked)
        refusals.check_constants(closed.consts)
        with CaptureSession(request) as session:
            capture = Capture(session, options.jax_control_flow, options.jax_max_control_flow_unroll, entry)
            self._run(root, closed, output_shape, capture, session)
            runtime = JaxRuntime(
                records=capture.records,
                reference=lambda: [
                    as_array(leaf) for leaf in jax.tree_util.tree_leaves(root.flat(*root.dynamic))
                ],
                params=capture.params,
                param_dtypes=capture.param_dtypes,
                values=capture.values,
                root=root,
                capture=capture,
                output_tree=output_shape,
            )
            trace = session.finish(self, runtime=runtime)
        if grad_options is not None:
            trace.autograd = derive(trace, grad_options)
        return trace

    def _root(self, model: Any, args: tuple, kwargs: dict, options: CaptureOptions) -> Root:
        mode = options.module_identity_mode
        framework = framework_of(model)
        if framework is None:
            if mode not in (None, "function_root"):
                raise refusals.option(
                    f"module_identity_mode={mode!r} needs an Equinox or Flax NNX module root",
                    "leave module_identity_mode unset for raw callables (function_root)",
                )
            return raw_root(model, args, kwargs)

        return module_root(model, framework, args, kwargs, attribute=mode != "function_root")

    def _run(self, root: Root, closed: Any, output_shape: Any, capture: Capture, session: Any) -> None:
        session.module(0, ["self"], root.class_name or "function", False, False)
        session.extra("provenance.param_source", "pytree-derived" if root.params else "none")
        session.extra("provenance.module_identity_mode", root.kind)
        if root.declare_modules is not None:
            root.declare_modules(session)
        pairs = []
        for name, value in root.params:
            value = as_array(value)
            pairs.append(capture.param(name, root.param_module(name), value, root.param_trainable(name)))
        for name, value in root.inputs:
            pairs.append(capture.input(name, as_array(value)))
        consts = [capture.constant(value) for value in closed.consts]
        session.enter(0)
        if root.scopes is not None:
            scopes = root.scopes(session)
            capture.scope_hook = scopes.hook(closed.jaxpr)
            capture.scope_close = scopes.close
        outs = capture.run(closed.jaxpr, consts, pairs, top=True)
        session.exit(0, [tensor for _, tensor in outs if tensor is not None])
        paths = jax.tree_util.tree_flatten_with_path(output_shape)[0]
        for (path, _), pair in zip(paths, outs):
            suffix = path_name(path)
            capture.output("output" + ("." + suffix if suffix else ""), pair)

    def grad_input(self, request: CaptureRequest, position: int) -> Any:
        # A raw fn(params, *inputs) given two or more arguments counts its inputs after the
        # parameter pytree; a module root's inputs are all its arguments.
        first = 1 if framework_of(request.model) is None and len(request.args) >= 2 else 0
        index = position + first
        return request.args[index] if 0 <= position and index < len(request.args) else None

    def differentiable_input(self, value: Any) -> bool:
        # An input may be a pytree: it can be differentiated when one of its leaves can.
        return any(inexact(leaf) for leaf in jax.tree_util.tree_leaves(value))

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        return model(*args, **kwargs)

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
