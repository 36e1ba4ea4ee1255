"""Derived gradients of an MLX trace: leaf gradients of a loss through MLX's own autodiff
(``mx.value_and_grad``). They are not a captured backward pass (``has_backward_pass`` stays
False).

For an ``mlx.nn.Module`` root the gradients are taken over ``model.parameters()``, rebound with
``model.update(params)`` in the rerun (and restored after); the rerun's output must match the
captured output within dtype tolerance, or the call refuses.

Per-op gradients (``intermediate_grads=True``): one more ``mx.value_and_grad`` replay runs the
forward with the capture's wrappers installed and logging off (a shadow session: no core
events, module call counts do not grow); each floating op output gets an identity tap
``out + tap`` with ``tap = 0``, so the gradient of the loss with respect to the tap is the
gradient at that op. The replay's structural signature (function, shape, dtype, parents, in
order) must equal the capture's, or no record is attached (``intermediate_replay_diverged``).
Each record must then pass two independent checks before it is exposed: a replacement gradient
(the loss differentiated through a single tap at that op alone) and a perturbation (a central
difference of the loss along the gradient's direction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from torchlens.adapter_kit.derived_grads import check_intermediate_cap
from torchlens.adapter_kit.replay import values_match
from torchlens.trace import Autograd, DerivedGrad

from .refusals import refuse

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"
INTERMEDIATE_REPLAY_FAILED = "intermediate_replay_failed"

#: Relative tolerance of the two checks (float32 finite differences are noisy).
CHECK_TOLERANCE = 2e-2


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar mx.array`` (default: the sum of every
    output array), which positional inputs get gradients (``input_grad_argnums``), and whether
    to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _loss(options: GradOptions, output: Any) -> Any:
    if options.loss_fn is not None:
        return options.loss_fn(output)
    from .adapter import output_pairs

    total = None
    for _, leaf in output_pairs(output):
        part = leaf.astype(mx.float32).sum()
        total = part if total is None else total + part
    return total


def derive(trace: Any, options: GradOptions) -> Autograd:
    """Leaf gradients of ``options``' loss for the trace's call (parameters and chosen inputs)."""
    runtime = trace._runtime
    model, args, kwargs = runtime.model, tuple(runtime.args), dict(runtime.kwargs or {})
    argnums = tuple(options.input_grad_argnums)
    for index in argnums:
        if index >= len(args) or not isinstance(args[index], mx.array):
            raise refuse(
                f"input_grad_argnums names argument {index}, which is not an mx.array",
                "option_unsupported",
                "name positional arguments that are mx.array inputs",
            )
    is_module = isinstance(model, nn.Module)
    original = model.parameters() if is_module else None
    values = runtime.values or {}
    captured = [values.get(op.parents[0]._info.get("value")) if op.parents else None for op in trace.outputs]
    differentiate = is_module or bool(argnums)

    def objective(params: Any, *inputs: Any) -> Any:
        call_args = list(args)
        for index, value in zip(argnums, inputs):
            call_args[index] = value
        if is_module:
            model.update(params)
        output = model(*call_args, **kwargs)
        return _loss(options, output), output

    grads: Any = ()
    try:
        output = objective(original if is_module else {}, *(args[i] for i in argnums))[1]
        from .adapter import output_pairs

        rerun = [leaf for _, leaf in output_pairs(output)]
        for before, after, op in zip(captured, rerun, trace.outputs):
            if before is not None and not values_match(trace._backend, after, before, op.dtype):
                raise refuse(
                    "the gradient rerun's output differs from the captured forward",
                    "capability_unsupported",
                    "make the forward deterministic (no state changed between calls)",
                )
        if differentiate:
            positions = tuple(range(1 + len(argnums))) if is_module else tuple(range(1, 1 + len(argnums)))
            grad_fn = mx.value_and_grad(lambda p, *i: objective(p, *i)[0], argnums=positions)
            # MLX 0.26 replaces the leaves of the trees it differentiates in place: hand it copies.
            _, grads = grad_fn(_copy_tree(original) if is_module else {}, *(args[i] for i in argnums))
            if len(positions) == 1:
                grads = (grads,)  # one differentiated argument: MLX returns its gradient bare
            if not is_module:
                grads = ({},) + tuple(grads)
    finally:
        if is_module:
            model.update(original)
    derived: Dict[str, Any] = {}
    if is_module and grads:
        # A shared parameter appears under each of its addresses; the model reads it through one
        # of them, so its gradient is the sum, kept under the primary address.
        primary = {id(array): address for address, _, array, _ in runtime.tree.params}
        arrays = dict(tree_flatten(original))
        for address, value in tree_flatten(grads[0]):
            key = primary.get(id(arrays.get(address)), address)
            name = f"params.{key}"
            derived[name] = derived[name] + value if name in derived else value
    for index, value in zip(argnums, grads[1:]):
        derived[f"inputs.{index}"] = value
    mx.eval(list(derived.values()))
    autograd = Autograd(derived_grads=derived)
    if options.intermediate_grads:
        _intermediate(trace, options, autograd, model, args, kwargs, is_module, original)
    return autograd


class _ShadowSession:
    """What a recorder reports to during a gradient replay: ids only, nothing sent anywhere."""

    def __init__(self) -> None:
        self._next = 1

    def new_value_id(self) -> int:
        value = self._next
        self._next += 1
        return value

    def __getattr__(self, name: str) -> Any:
        return _ignore


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _intermediate(
    trace: Any,
    options: GradOptions,
    autograd: Autograd,
    model: Any,
    args: tuple,
    kwargs: dict,
    is_module: bool,
    original: Any,
) -> None:
    from torchlens.adapter_kit import Patches

    from .adapter import input_pairs
    from .capture import Recorder, rebind_held_functions
    from .modules import discover

    runtime = trace._runtime
    captured_order = runtime.order
    captured_ids = runtime.order_ids
    positions = [
        index for index, entry in enumerate(captured_order) if entry[0] == "op" and _floating(entry[3])
    ]
    check_intermediate_cap(len(positions), options.max_intermediate_grads)
    shapes = {position: captured_order[position][2] for position in positions}
    dtypes = {position: captured_order[position][3] for position in positions}

    def run(params: Any, taps: Dict[int, Any]) -> Tuple[Any, Any]:
        """The forward under the wrappers with logging off; ``taps`` by order position."""
        recorder = Recorder(_ShadowSession())
        if is_module:
            model.update(params)
            recorder.defer_params(discover(model).params)
        recorder.scan_outside([model])
        for name, array in input_pairs(args, kwargs):
            recorder.input(name, array)

        def tap(value_id: int, array: Any) -> Any:
            position = recorder.position.get(value_id)
            added = taps.get(position)
            return array if added is None else array + added

        recorder.tap = tap
        with Patches() as patches:
            recorder.install(patches)
            if is_module:
                rebind_held_functions(
                    patches,
                    [record.obj for record in runtime.tree.modules if not record.container],
                    recorder.wrapped,
                )
            output = model(*args, **kwargs)
            recorder.declare_remaining()
        return _loss(options, output), recorder

    zeros = {
        position: mx.zeros(shapes[position], dtype=getattr(mx, dtypes[position])) for position in positions
    }
    params0 = original if is_module else {}
    try:
        try:
            _, shadow = run(params0, {})
        except Exception:
            autograd.intermediate_unavailable = INTERMEDIATE_REPLAY_FAILED
            return
        if shadow.order != captured_order:
            autograd.intermediate_unavailable = INTERMEDIATE_REPLAY_DIVERGED
            return

        def loss_of(taps: Dict[int, Any]) -> Any:
            return run(params0, taps)[0]

        _, grads = mx.value_and_grad(loss_of)(dict(zeros))
        mx.eval(grads)
        labels = {op._info.get("value"): op.label for op in trace.ops}
        records = {}
        for position in positions:
            grad = grads[position]
            single, single_grad = mx.value_and_grad(loss_of)({position: zeros[position]})
            mx.eval(single_grad)
            if not np.allclose(
                np.array(single_grad[position], dtype=np.float64),
                np.array(grad, dtype=np.float64),
                rtol=CHECK_TOLERANCE,
                atol=1e-6,
            ):
                continue
            if not _perturbation_agrees(loss_of, position, grad, zeros[position]):
                continue
            label = labels.get(captured_ids[position])
            if label is not None:
                records[label] = DerivedGrad(grad, "exact", ("replacement_gradient", "perturbation"))
        autograd.intermediate_derived_grads = records
    finally:
        if is_module:
            model.update(original)


def _copy_tree(tree: Any) -> Any:
    """The same leaves in new containers."""
    from mlx.utils import tree_map

    return tree_map(lambda leaf: leaf, tree)


def _perturbation_agrees(
    loss_of: Callable[[Dict[int, Any]], Any], position: int, grad: Any, zero: Any
) -> bool:
    """A central difference of the loss along ``grad``'s direction equals ``|grad|``."""
    host = np.array(grad.astype(mx.float32), dtype=np.float64)
    norm = float(np.linalg.norm(host))
    if norm == 0.0 or not np.isfinite(norm):
        # A zero gradient: moving the value a little must not move the loss.
        direction = np.ones_like(host) / max(1.0, np.sqrt(host.size))
        expected = 0.0
    else:
        direction = host / norm
        expected = norm
    step = 1e-2
    delta = mx.array(direction.astype(np.float32)).astype(zero.dtype)
    up = float(loss_of({position: zero + step * delta}).item())
    down = float(loss_of({position: zero - step * delta}).item())
    measured = (up - down) / (2 * step)
    return abs(measured - expected) <= CHECK_TOLERANCE * max(1.0, abs(expected))
