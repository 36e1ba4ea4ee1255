"""The JAX backend object the registry hands out."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import jax
from torchlens._core import core
from torchlens.errors import BackendUnsupportedError
from torchlens.options import CaptureOptions
from torchlens.trace import Trace, warn_matched_nothing

from . import refusals
from .capture import Capture
from .dtypes import is_key
from .roots import Root, check_root, framework_of, raw_root


class Runtime:
    """Runtime-only data of a live trace (never saved): the traced call, every op's value and
    what replay re-runs."""

    __slots__ = ("root", "capture", "output_tree")

    def __init__(self, root: Root, capture: Capture, output_tree: Any) -> None:
        self.root, self.capture, self.output_tree = root, capture, output_tree


def _refuse_option(message: str, remedy: str) -> BackendUnsupportedError:
    return refusals.refuse(message, "option_unsupported", remedy)


class JaxBackend:
    """Fills the backend contract for JAX."""

    name = "jax"

    def runtime_name(self) -> str:
        return "jax"

    def runtime_version(self) -> str:
        return jax.__version__

    # ---- payloads ----------------------------------------------------------------------------

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host NumPy view for diagnostics (typed keys as their key data)."""
        if is_key(value.dtype):
            value = jax.random.key_data(value)
        return np.asarray(value)

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order: a typed PRNG key as its key data, a sharded array
        assembled on the host."""
        if is_key(value.dtype):
            value = jax.random.key_data(value)
        array = np.ascontiguousarray(np.asarray(value))
        return memoryview(array.reshape(-1).view(np.uint8)).cast("B")

    def payload_from_buffer(self, buffer: Any, offset: int, length: int, dtype: str, shape: list) -> Any:
        from .payloads import from_buffer

        return from_buffer(buffer, offset, length, dtype, shape)

    def codec_metadata(self, trace: Trace) -> dict:
        from .payloads import codec_metadata

        return codec_metadata(trace)

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Any:
        from .payloads import finish_load

        return finish_load(payloads, labels, codec, hints)

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
        # Refusals come before any side effect: the function is not traced or run.
        selector = gate_capture_request(spec, save, intervene, stop_after)
        if options.extra.get("streaming"):
            gate(spec, "streaming")
        if options.extra.get("save_grads"):
            gate(spec, "save_grads")
        grad_options = options.grad_options
        if grad_options is not None:
            from .grads import GradOptions

            if not isinstance(grad_options, GradOptions):
                raise _refuse_option(
                    "grad_options for the jax backend must be tl.backends.jax.GradOptions",
                    "pass tl.backends.jax.GradOptions(loss_fn=...)",
                )
        args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        kwargs = dict(kwargs or {})
        root = self._root(model, args, kwargs, options)
        check_root(model, root.leaves)
        if grad_options is not None and root.framework == "flax_nnx":
            raise refusals.refuse(
                "derived gradients of Flax modules are not available yet",
                "capability_unsupported",
                "trace a raw function fn(params, *inputs) over the module's state instead",
            )

        closed, output_shape = jax.make_jaxpr(root.flat, return_shape=True)(*root.dynamic)
        refusals.check(closed.jaxpr, options.jax_control_flow, attributed=root.kind == "pytree_module")
        refusals.check_constants(closed.consts)

        session = core().start_session(
            options.recurrence_detection, options.compute_input_output_distances, None
        )
        capture = Capture(session, options.jax_control_flow, options.jax_max_control_flow_unroll)
        try:
            self._run(root, closed, output_shape, capture, session)
            native_trace, _ = session.finish()
        except BaseException:
            session.abandon()
            raise
        payloads = dict(capture.payloads)
        if selector is not None:
            matched = set(native_trace.select(selector.arena(), []))
            if not matched:
                warn_matched_nothing(selector)
            keep = sorted(
                op
                for op, slot in enumerate(capture.op_slots)
                if slot is not None and (op in matched or slot in capture.constant_slots)
            )
            native_trace.keep_payloads(keep)
            kept = {capture.op_slots[op] for op in keep}
            payloads = {slot: value for slot, value in payloads.items() if slot in kept}
        elif save is False:
            native_trace.keep_payloads([])
            payloads = {}
        trace = Trace(native_trace, payloads, self, runtime=Runtime(root, capture, output_shape))
        if grad_options is not None:
            from .grads import derive

            trace.autograd = derive(trace, grad_options)
        return trace

    def _root(self, model: Any, args: tuple, kwargs: dict, options: CaptureOptions) -> Root:
        mode = options.module_identity_mode
        framework = framework_of(model)
        if framework is None:
            if mode not in (None, "function_root"):
                raise _refuse_option(
                    f"module_identity_mode={mode!r} needs an Equinox or Flax NNX module root",
                    "leave module_identity_mode unset for raw callables (function_root)",
                )
            return raw_root(model, args, kwargs)
        if mode not in (None, "pytree_module", "function_root"):
            raise _refuse_option(
                f"module_identity_mode={mode!r} is not a jax mode",
                "use pytree_module (the default for modules) or function_root",
            )
        from .modules import module_root

        return module_root(model, framework, args, kwargs, attribute=mode != "function_root")

    def _run(self, root: Root, closed: Any, output_shape: Any, capture: Capture, session: Any) -> None:
        from .roots import path_name

        session.module(0, ["self"], root.class_name or "function", False, False)
        session.extra("provenance.param_source", "pytree-derived" if root.params else "none")
        session.extra("provenance.module_identity_mode", root.kind)
        if root.declare_modules is not None:
            root.declare_modules(session)
        pairs = []
        for name, value in root.params:
            value = jax.numpy.asarray(value)
            pairs.append(capture.param(name, root.param_module(name), value, root.param_trainable(name)))
        for name, value in root.inputs:
            pairs.append(capture.input(name, jax.numpy.asarray(value)))
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

    # ---- validation --------------------------------------------------------------------------

    def validate(self, trace: Trace, outputs: Any = None) -> Any:
        from .replay import validate

        return validate(trace, outputs)

    def validation_status(self, trace: Trace, outputs: Any = None) -> Any:
        from .replay import validation_status

        return validation_status(trace, outputs)


BACKEND = JaxBackend()


def _reference_output(model: Any, inputs: Any, kwargs: Optional[dict] = None) -> Any:
    """The model's output computed with no TorchLens machinery involved."""
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    return model(*args, **(kwargs or {}))


def _host_copy(value: Any) -> np.ndarray:
    if is_key(value.dtype):
        value = jax.random.key_data(value)
    return np.array(value, copy=True)


def _protocol():
    from torchlens.backends.contract import BackendProtocol
    from torchlens.backends.jax_spec import JAX_SPEC

    return BackendProtocol(
        requirement=JAX_SPEC.requirement,
        capabilities=JAX_SPEC.capabilities,
        capture=BACKEND.trace,
        validate=BACKEND.validate,
        reference_output=_reference_output,
        host_copy=_host_copy,
        realize=lambda values: values,
        refusal_codes=(
            "callback_effects",
            "nested_primitive_unsupported",
            "transformed_root_callable",
            "rng_state_in_graph",
            "constant_unrealizable",
            "intervene_unsupported",
            "stop_after_unsupported",
            "value_dependent_save_unsupported",
            "followed_by_unsupported",
            "streaming_unsupported",
            "save_grads_unsupported",
            "option_unsupported",
            "capability_unsupported",
        ),
        adapter=BACKEND,
    )


PROTOCOL = _protocol()
