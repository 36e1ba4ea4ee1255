"""Derived gradients of an MLX trace: leaf gradients of a loss through MLX's own autodiff
(``mx.value_and_grad``), driven by the kit's driver (:mod:`torchlens.adapter_kit.derived_grads`).
They are not a captured backward pass (``has_backward_pass`` stays False).

For an ``mlx.nn.Module`` root the gradients are taken over ``model.parameters()``, rebound with
``model.update(params)`` in the rerun (and restored after); the rerun's output must match the
captured output within dtype tolerance, or the call refuses (``derived_grad_replay_diverged``).

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
from typing import Any, Callable, Dict, List, Optional, Tuple

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_map

from torchlens.adapter_kit import derived_grads as kit
from torchlens.adapter_kit.structures import named_inputs
from torchlens.adapter_kit.wrappers import Patches

from .capture import Recorder
from .modules import discover

#: Relative tolerance of the two checks (float32 finite differences are noisy).
CHECK_TOLERANCE = 2e-2


@dataclass(frozen=True)
class GradOptions(kit.GradOptions):
    """What to differentiate: ``loss_fn(output) -> scalar mx.array`` (default: the sum of every
    output array), which positional inputs get gradients (``input_grad_argnums``), and whether
    to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""


class GradHooks(kit.GradHooks):
    """MLX's value-and-grad for the kit's gradient driver."""

    evidence = ("replacement_gradient", "perturbation")
    loss_kind = "scalar mx.array"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: mx.sum(output))"

    def __init__(self, trace: Any, options: GradOptions) -> None:
        super().__init__(trace, options)
        runtime = trace._runtime
        self.model = runtime.model
        self.args, self.kwargs = tuple(runtime.args), dict(runtime.kwargs or {})
        self.is_module = isinstance(self.model, nn.Module)
        self.original = self.model.parameters() if self.is_module else None
        #: Set by :meth:`op_pass` for :meth:`oracle`: the loss with taps added, the zero taps.
        self._loss_of_taps: Optional[Callable[[Dict[int, Any]], Any]] = None
        self._zeros: Dict[int, Any] = {}

    def captured_outputs(self) -> Optional[List[Tuple[Any, str]]]:
        values = self.trace._runtime.values or {}
        expected = [
            (values.get(op.parents[0]._info.get("value")) if op.parents else None, op.dtype)
            for op in self.trace.outputs
        ]
        # An output the capture kept no array for cannot be compared: nothing is checked then.
        return None if any(value is None for value, _ in expected) else expected

    def captured(self) -> List[kit.CapturedOp]:
        """The capture's order entries (kind, func, shape, dtype, ...), each signed by itself."""
        runtime = self.trace._runtime
        labels = {op._info.get("value"): op.label for op in self.trace.ops}
        return [
            kit.CapturedOp(
                labels.get(runtime.order_ids[position]),
                entry,
                entry[0] == "op" and kit.is_floating_dtype(entry[3]),
                position,
            )
            for position, entry in enumerate(runtime.order)
        ]

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> kit.GradPass:
        """``mx.value_and_grad`` over ``model.parameters()`` (rebound with ``model.update``, and
        restored after) and the chosen inputs; per-op gradients come from :meth:`op_pass`."""
        model, args, kwargs, is_module, original = (
            self.model,
            self.args,
            self.kwargs,
            self.is_module,
            self.original,
        )
        argnums = tuple(self.options.input_grad_argnums)

        def objective(params: Any, *inputs: Any) -> Any:
            call_args = list(args)
            for index, value in zip(argnums, inputs):
                call_args[index] = value
            if is_module:
                model.update(params)
            output = model(*call_args, **kwargs)
            return loss_of(output), output

        grads: Any = ()
        try:
            rerun = self.output_leaves(
                objective(original if is_module else {}, *(args[i] for i in argnums))[1]
            )
            if is_module or argnums:
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
            primary = {id(array): address for address, _, array, _ in self.trace._runtime.tree.params}
            arrays = dict(tree_flatten(original))
            for address, value in tree_flatten(grads[0]):
                name = kit.param_target(primary.get(id(arrays.get(address)), address))
                derived[name] = derived[name] + value if name in derived else value
        for index, value in zip(argnums, grads[1:]):
            derived[kit.input_target(index)] = value
        mx.eval(list(derived.values()))
        return kit.GradPass(grads=derived, outputs=rerun)

    def op_pass(self, loss_of: Callable[[Any], Any]) -> kit.GradPass:
        """One ``mx.value_and_grad`` replay with the capture's wrappers on a shadow session;
        each floating op output gets an identity tap ``out + tap`` (``tap = 0``): the gradient
        with respect to the tap is the gradient at that op."""
        model, args, kwargs, is_module = self.model, self.args, self.kwargs, self.is_module
        runtime = self.trace._runtime
        params0 = self.original if is_module else {}

        def run(taps: Dict[int, Any]) -> Tuple[Any, Any]:
            """The forward under the wrappers with logging off; ``taps`` by order position."""
            recorder = Recorder(kit.ShadowSession())
            if is_module:
                model.update(params0)
                recorder.defer_params(discover(model).params)
            recorder.scan_outside([model])
            for name, array in named_inputs(args, kwargs, mx.array):
                recorder.input(name, array)

            def tap(value_id: int, array: Any) -> Any:
                added = taps.get(recorder.position.get(value_id))
                return array if added is None else array + added

            recorder.tap = tap
            with Patches() as patches:
                recorder.install(patches)
                if is_module:
                    patches.rebind_held(
                        [record.obj for record in runtime.tree.modules if not record.container]
                    )
                output = model(*args, **kwargs)
                recorder.declare_remaining()
            return loss_of(output), recorder

        def loss_of_taps(taps: Dict[int, Any]) -> Any:
            return run(taps)[0]

        self._zeros = {
            op.key: mx.zeros(op.signature[2], dtype=getattr(mx, op.signature[3]))
            for op in self.captured()
            if op.floating
        }
        self._loss_of_taps = loss_of_taps
        try:
            _, shadow = run({})
            if shadow.order != runtime.order:
                # Do not differentiate a graph that is not the captured one.
                return kit.GradPass(replayed=list(shadow.order), op_grads=[])
            _, grads = mx.value_and_grad(loss_of_taps)(dict(self._zeros))
            mx.eval(grads)
        finally:
            if is_module:
                model.update(self.original)
        return kit.GradPass(
            replayed=list(shadow.order), op_grads=[grads.get(index) for index in range(len(shadow.order))]
        )

    def oracle(self, index: int, op: kit.CapturedOp, grad: Any) -> bool:
        """A replacement gradient (the loss through a single tap at this op alone) equal to the
        all-tap one, and a perturbation (a central difference of the loss along the gradient's
        direction) equal to its norm."""
        assert self._loss_of_taps is not None  # set by op_pass, which runs first
        zero = self._zeros[op.key]
        try:
            _, single = mx.value_and_grad(self._loss_of_taps)({op.key: zero})
            mx.eval(single)
            if not np.allclose(
                np.array(single[op.key], dtype=np.float64),
                np.array(grad, dtype=np.float64),
                rtol=CHECK_TOLERANCE,
                atol=1e-6,
            ):
                return False
            return _perturbation_agrees(self._loss_of_taps, op.key, grad, zero)
        finally:
            if self.is_module:
                self.model.update(self.original)


def _copy_tree(tree: Any) -> Any:
    """The same leaves in new containers."""
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
