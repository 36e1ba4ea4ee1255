"""Diagnostics over a finished trace, on every backend: the first op whose saved value holds a
NaN or an infinity, and units that never activate (both read saved values through the
backend's host view, ``backend.to_numpy``, so they work the same on every backend); and, for
torch modules, a guess of the input shape (``infer_input_shape``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

from .backends import get_backend, resolve
from .trace import Trace


@dataclass(frozen=True)
class NanFinding:
    """Where the first non-finite value appeared. ``kind`` is ``nan``, ``inf``, ``nan+inf`` or
    ``none``; ``uncertainty_zone`` lists earlier ops whose values were not saved (a NaN may have
    appeared there first)."""

    found: bool
    label: Optional[str] = None
    func_name: Optional[str] = None
    module: Optional[str] = None
    kind: str = "none"
    parents_finite: Optional[bool] = None
    uncertainty_zone: Tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class DeadUnits:
    """Units (positions along ``dim``) of one op's value that never exceed the threshold."""

    label: str
    total_units: int
    dead_count: int
    dead_indices: Tuple[int, ...]

    @property
    def dead_fraction(self) -> float:
        return self.dead_count / self.total_units if self.total_units else 0.0


def _host(trace: Trace, op: Any) -> Any:
    value = op.out
    if value is None:
        return None
    return trace._backend.to_numpy(value)


def _kind(array: Any) -> str:
    import numpy as np  # lazy: importing torchlens must not import numpy

    if array.dtype.kind not in "fc":
        return "none"
    nan = bool(np.isnan(array).any())
    inf = bool(np.isinf(array).any())
    return "nan+inf" if nan and inf else "nan" if nan else "inf" if inf else "none"


def find_nan(trace: Trace) -> NanFinding:
    """The first op, in execution order, whose saved value holds a NaN or an infinity."""
    unsaved: List[str] = []
    for op in trace.ops:
        if op.kind in ("input", "output"):
            continue
        array = _host(trace, op)
        if array is None:
            unsaved.append(op.label)
            continue
        kind = _kind(array)
        if kind == "none":
            continue
        parents = [_host(trace, parent) for parent in op.parents]
        parents_finite = all(parent is not None and _kind(parent) == "none" for parent in parents)
        return NanFinding(True, op.label, op.func_name, op.module, kind, parents_finite, tuple(unsaved))
    return NanFinding(False, uncertainty_zone=tuple(unsaved))


def dead_units(trace: Trace, dim: int = 1, threshold: float = 0.0) -> List[DeadUnits]:
    """For every saved floating-point op with an axis ``dim``: the units along that axis whose
    value never exceeds ``threshold`` anywhere else in the value (a dead ReLU unit over the batch
    and spatial positions). On a convolution output the channel axis must be passed as ``dim``
    (1 for NCHW, -1 for NHWC)."""
    import numpy as np  # lazy: importing torchlens must not import numpy

    rows = []
    for op in trace.ops:
        if op.kind in ("input", "output"):
            continue
        array = _host(trace, op)
        if array is None or array.dtype.kind != "f" or array.ndim == 0:
            continue
        axis = dim if dim >= 0 else array.ndim + dim
        if not 0 <= axis < array.ndim or array.ndim < 2:
            continue
        moved = np.moveaxis(array.astype(np.float64), axis, 0).reshape(array.shape[axis], -1)
        dead = np.nonzero(moved.max(axis=1) <= threshold)[0]
        rows.append(DeadUnits(op.label, int(array.shape[axis]), int(dead.size), tuple(int(i) for i in dead)))
    return rows


def infer_input_shape(model: Any, backend: Optional[str] = None) -> Any:
    """Proposes an input shape for a model from its first layer (a convolution's channels, a
    linear or recurrent layer's features, an attention layer's width, an embedding's token ids),
    confirmed by one forward on zeros, through the backend's ``infer_input_shape`` hook. PyTorch
    implements it (the spec reserves it); another framework's model refuses with
    ``capability_unsupported``; a torch model whose first layer does not tell refuses with
    ``input_shape_unknown``. Returns the backend's guess (``.shape``, ``.reason``; torch's is an
    ``InputShapeGuess``)."""
    spec = resolve(model, (), backend)
    return get_backend(spec.name).infer_input_shape(model)
