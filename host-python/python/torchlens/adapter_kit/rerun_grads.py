"""Derived gradients of a capture by program (:mod:`.program_walk`), for the kit's driver
(:mod:`.derived_grads`): leaf gradients of the loss through the framework's gradient of the
traced call (:class:`~.flat_call.FlatCall`), and per-op gradients.

Per-op gradients come from the captured graph itself, re-evaluated differentiably from its
replay records (:func:`~.program_import.rerun`, so there is no structural match to make): the
re-evaluation must reproduce the captured outputs, one all-tap gradient gives every op's
gradient, and each must then agree with the gradient of the loss with that op's value replaced
by a free variable and with a central finite difference along a random direction."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy

from ..errors import TorchLensError
from .derived_grads import (
    INTERMEDIATE_GRAD_UNSUPPORTED,
    INTERMEDIATE_REPLAY_FAILED,
    CapturedOp,
    GradHooks,
    GradPass,
    Unavailable,
    input_target,
    param_target,
    reproduces,
)
from .program_import import rerun


class RerunGradHooks(GradHooks):
    """The per-op pass and oracle over the re-evaluated graph; a backend adds its leaf pass and
    the framework calls below. The trace's runtime keeps every value by id (``values``)."""

    evidence = ("boundary_replacement_grad", "finite_difference")
    #: The framework's gradient transform, as a refusal of the leaf pass names it, and what
    #: to do instead.
    grad_name = "the framework's autodiff"
    grad_remedy = "differentiate a function the framework's autodiff supports"

    def __init__(self, trace: Any, options: Any, adapter: Any = None) -> None:
        super().__init__(trace, options, adapter)
        self.rng = numpy.random.default_rng(0)
        #: Set by :meth:`op_pass` for :meth:`oracle`.
        self._loss_of: Optional[Callable[[Any], Any]] = None

    # ---- the framework's calls ------------------------------------------------------------------

    def grad(self, function: Callable[[Any], Any], at: Any) -> Any:
        """The gradient of the scalar ``function`` at ``at`` (an array, or a dict of arrays)."""
        raise NotImplementedError

    def differentiable(self, value: Any) -> bool:
        """Whether a recorded value gets a per-op gradient (an inexact dtype)."""
        raise NotImplementedError

    def zeros_like(self, value: Any) -> Any:
        raise NotImplementedError

    def structured(self, outputs: List[Any]) -> Any:
        """A re-evaluation's output values as the traced call's output structure."""
        raise NotImplementedError

    def array_like(self, array: numpy.ndarray, like: Any) -> Any:
        """A host array as a framework array of ``like``'s dtype."""
        raise NotImplementedError

    def param_leaves(self, tree: Any) -> List[Any]:
        """The array leaves of a parameter structure given as ``GradOptions.params``."""
        raise NotImplementedError

    # ---- the passes -------------------------------------------------------------------------------

    def evaluate(self, taps: Dict[int, Any], replace: Optional[Tuple[int, Any]] = None) -> Any:
        """The captured graph re-evaluated differentiably (``taps`` added, or one value
        replaced), as the call's output structure."""
        return self.structured(rerun(self.trace, taps, replace))

    def captured(self) -> List[CapturedOp]:
        """The compute ops with a recorded differentiable value (keyed by value id)."""
        recorded = self.trace._runtime.values
        return [
            CapturedOp(op.label, (), True, op._info["value"])
            for op in self.trace.ops
            if op.kind == "compute"
            and op._info["value"] in recorded
            and self.differentiable(recorded[op._info["value"]])
        ]

    def captured_outputs(self) -> List[Tuple[Any, str]]:
        recorded = self.trace._runtime.values
        return [(recorded[op.parents[0]._info["value"]], op.dtype) for op in self.trace.outputs]

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> GradPass:
        """The framework's gradient of the traced call (the runtime's
        :class:`~.flat_call.FlatCall`) over its parameters (or ``GradOptions.params`` in their
        place) and the inputs ``input_grad_argnums`` chooses."""
        options = self.options
        root = self.trace._runtime.root
        dynamic = list(root.dynamic)
        count = len(root.params)
        given = getattr(options, "params", None)
        if given is not None:
            leaves = self.param_leaves(given)
            if len(leaves) != count:
                raise self.refuse(
                    f"GradOptions.params has {len(leaves)} array leaves, the traced parameters {count}",
                    "option_value_invalid",
                    "pass the same parameter structure the function was traced with",
                )
            dynamic[:count] = leaves
        wrt = [index for index in range(count) if self.differentiable(dynamic[index])]
        names = [param_target(root.params[index][0]) for index in wrt]
        argnums = set(options.input_grad_argnums)
        for offset, ((name, _), position) in enumerate(zip(root.inputs, root.input_positions)):
            if position in argnums and self.differentiable(dynamic[count + offset]):
                wrt.append(count + offset)
                names.append(input_target(position, name[len(root.input_names[position]) :]))

        def loss_at(chosen: List[Any]) -> Any:
            full = list(dynamic)
            for index, value in zip(wrt, chosen):
                full[index] = value
            return loss_of(root.flat(*full))

        try:
            grads = self.grad(loss_at, [dynamic[index] for index in wrt])
        except TorchLensError:
            raise  # our own refusal (of the loss), not the framework's
        except Exception as error:  # the framework's own refusal (reverse mode of a loop, ...)
            raise self.refuse(
                f"{self.grad_name} cannot differentiate the traced function: {str(error).splitlines()[0]}",
                "capability_unsupported",
                self.grad_remedy,
            ) from error
        return GradPass(grads=dict(zip(names, grads)))

    def op_pass(self, loss_of: Callable[[Any], Any]) -> GradPass:
        """The captured graph re-evaluated, then one all-tap gradient."""
        self._loss_of = loss_of
        try:
            outputs = self.output_leaves(self.evaluate({}))
        except Exception as error:
            raise Unavailable(
                INTERMEDIATE_REPLAY_FAILED, f"re-evaluating the graph raised {error!r}"
            ) from error
        recorded = self.trace._runtime.values
        keys = [op.key for op in self.captured()]
        zeros = {key: self.zeros_like(recorded[key]) for key in keys}
        if not reproduces(self, outputs):
            # The driver withholds every record; do not differentiate a graph that diverged.
            return GradPass(outputs=outputs, op_grads=[])
        try:
            tapped = self.grad(lambda taps: loss_of(self.evaluate(taps)), zeros)
        except Exception as error:
            # The producer cannot run under the framework's autodiff (a loop region, say).
            raise Unavailable(
                INTERMEDIATE_GRAD_UNSUPPORTED, f"the gradient of the graph raised {error!r}"
            ) from error
        return GradPass(outputs=outputs, op_grads=[tapped[key] for key in keys])

    def oracle(self, index: int, op: CapturedOp, grad: Any) -> bool:
        """The gradient of the loss with this op's value replaced by a free variable, and a
        central finite difference along a random direction, both agree with ``grad``."""
        assert self._loss_of is not None  # set by op_pass, which runs first
        loss_of, value_id = self._loss_of, op.key
        value = self.trace._runtime.values[value_id]

        def replaced(v: Any) -> Any:
            return loss_of(self.evaluate({}, (value_id, v)))

        try:
            oracle = self.grad(replaced, value)
        except Exception:
            return False
        if not numpy.allclose(
            numpy.asarray(grad, numpy.float64), numpy.asarray(oracle, numpy.float64), rtol=1e-4, atol=1e-5
        ):
            return False
        direction = self.array_like(self.rng.standard_normal(value.shape), value)
        step = 1e-3 * (1.0 + float(numpy.max(numpy.abs(numpy.asarray(value)))))
        finite = (float(replaced(value + step * direction)) - float(replaced(value - step * direction))) / (
            2 * step
        )
        analytic = float(
            numpy.vdot(numpy.asarray(grad, numpy.float32), numpy.asarray(direction, numpy.float32))
        )
        return abs(finite - analytic) <= 2e-2 * (1.0 + abs(analytic))
