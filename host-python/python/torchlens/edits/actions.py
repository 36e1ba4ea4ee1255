"""Edit actions: what replaces a value when a rule fires. Each action is plain data with a
framework-neutral ``apply`` computed on a host (NumPy) copy; a backend may apply it natively in
its ``apply_action`` hook instead. A replacement always keeps the value's shape and dtype."""

from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..argument_checks import flag, optional_instance_of, real_number, short_repr
from ..errors import ArgumentError, PatchError, UnsupportedError


def _shape_kept(action: str, before: Any, after: Any) -> None:
    if tuple(before.shape) != tuple(after.shape):
        raise UnsupportedError(
            f"{action} would change the shape from {tuple(before.shape)} to {tuple(after.shape)}",
            "edit_shape_changed",
            "make the replacement the same shape as the value it replaces",
        )


class Action:
    """An edit action. ``name`` is how the trace records it (``scale(0.5)``). An action whose
    ``needs_context`` is True reads the op's :class:`~torchlens.edits.RecordContext` when it
    fires (passed to ``apply`` as ``context``)."""

    name = "action"
    needs_context = False

    def describe(self) -> str:
        """The action as the trace's edit record names it."""
        return self.name

    def compute(self, array: Any) -> Any:
        """The replacement of a host (NumPy) array."""
        raise NotImplementedError

    def apply(self, value: Any, backend: Any, context: Any = None) -> Any:
        """The replacement of a framework value, computed on a host copy through ``backend``'s
        ``to_numpy``/``from_numpy`` and converted back to the value's dtype."""
        import numpy  # lazy: importing torchlens must not import numpy

        array = numpy.array(backend.to_numpy(value), copy=True)
        result = numpy.asarray(self.compute(array))
        _shape_kept(self.describe(), array, result)
        return backend.from_numpy(
            numpy.ascontiguousarray(result.astype(array.dtype)), backend.neutral_dtype(value)
        )


@dataclass(frozen=True)
class ZeroAblate(Action):
    """Replaces the value with zeros."""

    name = "zero_ablate"

    def compute(self, array: Any) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        return numpy.zeros_like(array)


@dataclass(frozen=True)
class Scale(Action):
    """Multiplies the value by ``factor``."""

    factor: float = 1.0
    name = "scale"

    def describe(self) -> str:
        return f"scale({self.factor!r})"

    def compute(self, array: Any) -> Any:
        return array * self.factor


@dataclass(frozen=True)
class Add(Action):
    """Adds ``delta`` (a number or an array broadcastable to the value)."""

    delta: Any = 0
    name = "add"

    def describe(self) -> str:
        return f"add({self.delta!r})" if isinstance(self.delta, (int, float)) else "add(array)"

    def compute(self, array: Any) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        return array + numpy.asarray(self.delta)


@dataclass(frozen=True)
class Clamp(Action):
    """Clamps the value into ``[min, max]`` (either bound may be None)."""

    min: Optional[float] = None
    max: Optional[float] = None
    name = "clamp"

    def describe(self) -> str:
        return f"clamp(min={self.min!r}, max={self.max!r})"

    def compute(self, array: Any) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        return numpy.clip(array, self.min, self.max)


@dataclass(frozen=True)
class MeanAblate(Action):
    """Fills the value with its mean (over ``dim`` when given, else over every element), or with
    the global mean of ``source`` when one is given."""

    source: Any = None
    dim: Optional[int] = None
    name = "mean_ablate"

    def describe(self) -> str:
        return "mean_ablate(source)" if self.source is not None else f"mean_ablate(dim={self.dim!r})"

    def compute(self, array: Any) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        if self.source is not None:
            return numpy.full_like(array, numpy.asarray(self.source).mean())
        if self.dim is None:
            return numpy.full_like(array, array.mean())
        return numpy.broadcast_to(array.mean(axis=self.dim, keepdims=True), array.shape).copy()


@dataclass(frozen=True)
class ReplaceWith(Action):
    """Replaces the value with a fixed array (or what a zero-argument callable returns)."""

    value: Any = None
    name = "replace_with"

    def compute(self, array: Any) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        replacement = self.value() if callable(self.value) else self.value
        return numpy.broadcast_to(numpy.asarray(replacement), array.shape).copy()


@dataclass(frozen=True)
class CallableAction(Action):
    """A plain callable written against the framework's arrays: ``function(value) -> value``, or
    ``function(value, ctx) -> value`` with ``ctx`` the op's :class:`~torchlens.edits.RecordContext`."""

    function: Callable[..., Any] = lambda value: value
    name = "callable"

    @property
    def needs_context(self) -> bool:  # type: ignore[override]
        return _takes_two_arguments(self.function)

    def describe(self) -> str:
        return f"callable({getattr(self.function, '__qualname__', type(self.function).__name__)})"

    def apply(self, value: Any, backend: Any, context: Any = None) -> Any:
        result = self.function(value, context) if self.needs_context else self.function(value)
        _shape_kept(self.describe(), value, result)
        return result


def _takes_two_arguments(function: Callable[..., Any]) -> bool:
    """Whether ``function`` accepts a second positional argument (the context)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        parameter
        for parameter in parameters
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]
    variadic = any(parameter.kind is parameter.VAR_POSITIONAL for parameter in parameters)
    return variadic or len(positional) >= 2


class PatchFrom(Action):
    """Activation patching: each matched op takes the value the same site had in ``source``,
    another trace of the same model (run on another input). Sites pair up by their place in
    the run (the n-th computed value); the pair must agree on function and shape, and the
    patched op's label is checked against the source's when the capture finishes."""

    name = "patch_from"
    needs_context = True

    def __init__(self, source: Any) -> None:
        self.source = source
        self._computed: Any = None

    def describe(self) -> str:
        return "patch_from(trace)"

    def source_op(self, context: Any) -> Any:
        """The source trace's op at the context's site (``patch_site_missing`` otherwise)."""
        if self._computed is None:
            self._computed = [op for op in self.source.ops if op.kind in ("compute", "literal_producer")]
        step = context.step_index
        op = self._computed[step - 1] if step is not None and 0 < step <= len(self._computed) else None
        if op is None or op.func_name != context.func_name:
            found = f"{op.label} ({op.func_name})" if op is not None else "nothing"
            raise PatchError(
                f"the source trace has no {context.func_name} at this op's site (computed value "
                f"{step}; the source has {found} there)",
                "patch_site_missing",
                "patch from a trace of the same model with the same control flow",
            )
        return op

    def apply(self, value: Any, backend: Any, context: Any = None) -> Any:
        op = self.source_op(context)
        donor = op.out
        if donor is None:
            raise PatchError(
                f"the source trace did not save {op.label}",
                "patch_site_missing",
                "trace the source with save=True, or a save= that covers the patched ops",
            )
        if tuple(donor.shape) != tuple(value.shape):
            raise PatchError(
                f"{op.label} has shape {tuple(donor.shape)} in the source, {tuple(value.shape)} here",
                "patch_shape_mismatch",
                "patch from a run of the same model on an input of the same shape",
            )
        return backend.patch_value(donor, value) if hasattr(backend, "patch_value") else donor


def _refuse_shape_change(force_shape_change: bool) -> None:
    flag(force_shape_change, "force_shape_change")
    if force_shape_change:
        raise UnsupportedError(
            "edits keep the shape and dtype of the value they replace",
            "edit_shape_changed",
            "leave force_shape_change unset and return a value of the same shape",
        )


def zero_ablate(*, force_shape_change: bool = False) -> Action:
    """Replace the value with zeros."""
    _refuse_shape_change(force_shape_change)
    return ZeroAblate()


def scale(factor: float, *, force_shape_change: bool = False) -> Action:
    """Multiply the value by ``factor``."""
    _refuse_shape_change(force_shape_change)
    return Scale(real_number(factor, "factor", "tl.scale(0.5)"))


def add(delta: Any, *, force_shape_change: bool = False) -> Action:
    """Add ``delta`` (a number or an array) to the value."""
    _refuse_shape_change(force_shape_change)
    return Add(_array_like(delta, "delta", "tl.add(0.1)"))


def clamp(
    *, min: Optional[float] = None, max: Optional[float] = None, force_shape_change: bool = False
) -> Action:
    """Clamp the value into ``[min, max]``."""
    _refuse_shape_change(force_shape_change)
    low = real_number(min, "min", "tl.clamp(min=0.0)", optional=True)
    high = real_number(max, "max", "tl.clamp(max=1.0)", optional=True)
    if low is not None and high is not None and low > high:
        raise ArgumentError(
            f"tl.clamp(min={low}, max={high}): min is above max",
            "argument_invalid",
            "pass min <= max",
        )
    return Clamp(low, high)


def mean_ablate(
    source: Any = None, *, dim: Optional[int] = None, over: str = "self", force_shape_change: bool = False
) -> Action:
    """Fill the value with a mean: of ``source`` when given, else of the value itself (over
    ``dim``, or every element)."""
    _refuse_shape_change(force_shape_change)
    optional_instance_of(
        dim, int, "dim", "an axis number", "pass dim=0 for the first axis, or leave it unset"
    )
    return MeanAblate(source, dim)


def replace_with(value: Any, *, force_shape_change: bool = False) -> Action:
    """Replace the value with ``value`` (an array, or a zero-argument callable returning one)."""
    _refuse_shape_change(force_shape_change)
    return ReplaceWith(
        value
        if callable(value) and not isinstance(value, type)
        else _array_like(value, "value", "tl.replace_with(torch.zeros(2, 4))")
    )


def patch_from(source: Any) -> Action:
    """Activation patching: each matched op takes its value from ``source`` (a trace of the
    same model), matched by site; a missing site or another shape is a typed error."""
    # A trace (or a fork of one): what the patch reads is its ops, by site.
    if not (hasattr(type(source), "ops") and hasattr(type(source), "select")):
        raise ArgumentError(
            f"tl.patch_from takes a trace of the same model, got {type(source).__name__} "
            f"{short_repr(source)}",
            "argument_invalid",
            "pass the trace to patch from: tl.patch_from(clean_trace)",
        )
    return PatchFrom(source)


def _array_like(value: Any, argument: str, example: str) -> Any:
    """A number or an array (anything with a shape, or a list or tuple of numbers): what NumPy
    broadcasts against the value when the action fires."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return value
    if hasattr(value, "shape") or isinstance(value, (list, tuple)):
        return value
    raise ArgumentError(
        f"{argument} must be a number or an array, got {type(value).__name__} {short_repr(value)}",
        "argument_invalid",
        f"pass a number or an array of the value's shape, e.g. {example}",
    )


def as_action(action: Any) -> Action:
    """An :class:`Action` from an action or a plain callable."""
    if isinstance(action, Action):
        return action
    # A class is callable, but as an action it would be constructed with each value.
    if callable(action) and not isinstance(action, type):
        return CallableAction(action)
    raise ArgumentError(
        f"an edit action must be a tl action or a callable, got {type(action).__name__} {short_repr(action)}",
        "argument_invalid",
        "pass an action such as tl.zero_ablate(), tl.scale(0.5), or a function value -> value",
    )
