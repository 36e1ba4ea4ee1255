"""Replay validation of a live JAX trace.

1. The function runs again, plainly; its outputs must equal the trace's outputs (or the
   ``outputs`` the caller passes).
2. Every captured equation is re-run (``Primitive.bind``) from its parents' recorded values —
   the runtime-only copies, whatever ``save=`` kept public — and must reproduce its value.
3. Each floating-point parent (parameters included) is perturbed; at least one perturbation must
   change the result, showing the recorded edge matters. Ops with a non-float result
   (comparisons, integer casts) and rounding ops are exempt.
4. A region's boundary is opaque (``opaque_region``, so the status is at best unverified); its
   seams are checked by re-running the whole region from the boundary's parents and comparing
   every projection.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import jax
import jax.numpy as jnp
from torchlens.validation import ValidationStatus, fold

from .capture import ParamRef, ReplaySlot
from .dtypes import is_key

#: Float-valued ops whose result does not move under a small perturbation of their input.
_ROUNDING = frozenset({"sign", "floor", "ceil", "round", "stop_gradient"})

_TOLERANCE = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-9}


def _host(value: Any) -> np.ndarray:
    if is_key(value.dtype):
        value = jax.random.key_data(value)
    return np.asarray(value)


def _array(value: Any) -> Any:
    """A replayed result as an array (a primitive applied to a literal may return the literal)."""
    return value if isinstance(value, jax.Array) else jnp.asarray(value)


def _floating(value: Any) -> bool:
    return hasattr(value, "dtype") and not is_key(value.dtype) and jnp.issubdtype(value.dtype, jnp.inexact)


def same(left: Any, right: Any) -> bool:
    """Equal, or for floating point equal within the dtype's rounding tolerance."""
    a, b = _host(left), _host(right)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" or a.dtype.name == "bfloat16"):
        return True
    if not _floating(left):
        return False
    tolerance = _TOLERANCE.get(a.dtype.name, 1e-5)
    if a.dtype.kind == "c":
        return bool(np.allclose(a, b, rtol=tolerance, atol=tolerance, equal_nan=True))
    return bool(
        np.allclose(
            a.astype(np.float64), b.astype(np.float64), rtol=tolerance, atol=tolerance, equal_nan=True
        )
    )


def _materialize(template: tuple, values: Dict[int, Any], params: Dict[int, Any], override=None) -> list:
    args = []
    for item in template:
        if isinstance(item, ReplaySlot):
            key: Tuple[str, int] = ("op", item.op)
            value = values[item.op]
        elif isinstance(item, ParamRef):
            key = ("param", item.tensor)
            value = params[item.tensor]
        else:
            args.append(item)
            continue
        args.append(override[1] if override is not None and override[0] == key else value)
    return args


def _parents(
    template: tuple, values: Dict[int, Any], params: Dict[int, Any]
) -> List[Tuple[Tuple[str, int], Any]]:
    found = {}
    for item in template:
        if isinstance(item, ReplaySlot):
            found[("op", item.op)] = values[item.op]
        elif isinstance(item, ParamRef):
            found[("param", item.tensor)] = params[item.tensor]
    return list(found.items())


def _perturbed(value: Any, rng: np.random.Generator) -> Any:
    noise = jnp.asarray(rng.standard_normal(value.shape).astype(np.float32)).astype(value.dtype)
    return value + noise * (jnp.abs(value) + 1)


def validate(trace: Any, outputs: Optional[List[Any]] = None) -> Any:
    """True/False when the outcome is final, otherwise the :class:`ValidationStatus`."""
    return validation_status(trace, outputs).outcome()


def validation_status(trace: Any, outputs: Optional[List[Any]] = None) -> ValidationStatus:
    labels = [op.label for op in trace.ops]
    runtime = trace._runtime
    if runtime is None:
        return fold([], labels, runtime_available=False)
    capture = runtime.capture
    values, params = capture.values, capture.param_values
    decisions: List[Tuple[int, str, str]] = []
    rng = np.random.default_rng(0)

    # 1. The function's own outputs, run plainly.
    if outputs:
        expected = jax.tree_util.tree_leaves(list(outputs))
    else:
        root = runtime.root
        expected = jax.tree_util.tree_leaves(root.flat(*root.dynamic))
    # A Python number the function returns was recorded as a constant array.
    expected = [value if hasattr(value, "dtype") else jnp.asarray(value) for value in expected]
    for op, value in zip(trace.outputs, expected):
        parent = op._info["parents"][0][0] if op._info["parents"] else None
        recorded = values.get(parent)
        if recorded is None or not same(recorded, value):
            decisions.append((op.index, "failed", "output_mismatch"))
        else:
            decisions.append((op.index, "leaf", "replay_matched"))

    # 2-4. Every op from its parents' recorded values.
    region_results: Dict[int, Any] = {}
    for op in trace.ops:
        index = op.index
        kind = op.kind
        if kind == "input":
            decisions.append((index, "leaf", "input_leaf"))
            continue
        if kind in ("constant", "buffer"):
            decisions.append((index, "leaf", "constant_producer_leaf"))
            continue
        if index in capture.regions:
            decisions.append((index, "not_replayable", "opaque_region"))
            continue
        if index in capture.projections:
            boundary, position = capture.projections[index]
            if boundary not in region_results:
                call, template, _ = capture.regions[boundary]
                try:
                    region_results[boundary] = call(*_materialize(template, values, params))
                except Exception:
                    region_results[boundary] = None
            result = region_results[boundary]
            if result is None:
                decisions.append((index, "failed", "replay_failed"))
            elif same(_array(result[position]), values[index]):
                decisions.append((index, "passed", "replay_matched"))
            else:
                decisions.append((index, "failed", "replay_mismatch"))
            continue
        record = capture.replays.get(index)
        if record is None:
            continue
        call, name, template, position = record
        try:
            replayed = _array(call(*_materialize(template, values, params))[position])
        except Exception:
            decisions.append((index, "failed", "replay_failed"))
            continue
        if not same(replayed, values[index]):
            decisions.append((index, "failed", "replay_mismatch"))
            continue
        # A parent with no finite element (a NaN constant) cannot show the edge by perturbation.
        floating = [
            (key, value)
            for key, value in _parents(template, values, params)
            if _floating(value) and bool(np.isfinite(_host(value)).any())
        ]
        if not floating or _host(values[index]).size == 0:
            # Nothing to perturb, or an empty result no perturbation can change.
            decisions.append((index, "passed", "no_perturbable_parent"))
            continue
        if name in _ROUNDING or not _floating(values[index]):
            decisions.append((index, "passed", "replay_matched"))
            continue
        moved = False
        for key, value in floating:
            try:
                override = (key, _perturbed(value, rng))
                changed = _array(call(*_materialize(template, values, params, override))[position])
            except Exception:
                continue
            if not same(changed, values[index]):
                moved = True
                break
        decisions.append(
            (index, "passed", "replay_matched") if moved else (index, "failed", "parent_perturbation_inert")
        )
    return fold(decisions, labels)
