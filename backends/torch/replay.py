"""Replay validation of a torch trace.

1. The model runs again with no wrapper installed; its output must equal the trace's output
   (or the ``outputs`` the caller passes).
2. Every op whose value and whose parents' values were saved is re-run from the parents' saved
   values (copies, so in-place ops cannot touch the trace) and must reproduce its saved value
   bit for bit.
3. Each floating-point parent is perturbed; at least one perturbation must change the op's
   result, showing the recorded edges matter. Ops whose result does not depend on values
   (``zeros_like``, comparisons, ``argmax`` ...) are exempt.

The core folds the per-op decisions into one status (any failure → failed, naming the first
failing op; ops that could not be replayed → unverified)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch
from torchlens.validation import ValidationStatus, fold

from .capture import ReplaySlot

#: Functions whose result does not change when an input's values change (only its shape,
#: dtype or order matter), so a perturbation cannot show the edge.
_VALUE_INDEPENDENT = frozenset(
    {
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "argmax",
        "argmin",
        "argsort",
        "sign",
        "floor",
        "ceil",
        "round",
        "trunc",
        "__gt__",
        "__lt__",
        "__ge__",
        "__le__",
        "__eq__",
        "__ne__",
        "gt",
        "lt",
        "ge",
        "le",
        "eq",
        "ne",
        "isnan",
        "isinf",
        "isfinite",
        "size",
        "dim",
        "numel",
        "max",
        "min",
        "topk",
        "sort",
        "nonzero",
        "where",
        "masked_fill",
        "bool",
        "long",
        "int",
    }
)


def _materialize(template: Any, values: dict, override: Optional[Tuple[int, torch.Tensor]] = None) -> Any:
    if isinstance(template, ReplaySlot):
        if override is not None and override[0] == template.op:
            return override[1].clone()
        return values[template.op].clone()
    if isinstance(template, tuple):
        return tuple(_materialize(item, values, override) for item in template)
    if isinstance(template, list):
        return [_materialize(item, values, override) for item in template]
    return template


def _slots(template: Any, found: List[int]) -> None:
    if isinstance(template, ReplaySlot):
        found.append(template.op)
    elif isinstance(template, (tuple, list)):
        for item in template:
            _slots(item, found)


def _run(record: tuple, values: dict, override=None) -> torch.Tensor:
    func, name, args_template, kwargs_template, index = record
    args = _materialize(args_template, values, override)
    kwargs = {key: _materialize(value, values, override) for key, value in kwargs_template.items()}
    result = func(*args, **kwargs)
    if name == "__setitem__":
        return args[0]
    if index is None:
        return result
    tensors = [item for item in result if isinstance(item, torch.Tensor)]
    return tensors[index]


#: Relative tolerance by dtype: torch may pick another kernel for the same op (a fused
#: attention path runs only when no function mode is active), which changes rounding.
_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-4, torch.float64: 1e-9}


def _same(left: torch.Tensor, right: torch.Tensor) -> bool:
    """Equal, or for floating point equal within the dtype's rounding tolerance."""
    if left.shape != right.shape or left.dtype != right.dtype:
        return False
    if torch.equal(left, right):
        return True
    if not left.is_floating_point():
        return False
    tolerance = _TOLERANCE.get(left.dtype, 1e-4)
    return bool(torch.allclose(left, right, rtol=tolerance, atol=tolerance, equal_nan=True))


def _perturbed(value: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(value.shape, generator=generator, dtype=torch.float32).to(value.dtype)
    return value + noise * (value.abs() + 1)


def validate(trace: Any, outputs: Optional[List[Any]] = None) -> Any:
    """Replay-validates a live torch trace; returns True/False when the status is final,
    otherwise the :class:`ValidationStatus`."""
    return validation_status(trace, outputs).outcome()


def validation_status(trace: Any, outputs: Optional[List[Any]] = None) -> ValidationStatus:
    labels = [op.label for op in trace.ops]
    runtime = trace._runtime
    if runtime is None:
        return fold([], labels, runtime_available=False)
    from torchlens.errors import PayloadModifiedError

    ops = trace.ops
    values = {}
    decisions: List[Tuple[int, str, str]] = []
    for op in ops:
        if not op.saved:
            continue
        try:
            values[op.index] = op.out
        except PayloadModifiedError:
            decisions.append((op.index, "failed", "payload_modified_after_capture"))
    generator = torch.Generator().manual_seed(0)

    # 1. The model's own output, with nothing installed.
    with torch.no_grad():
        if outputs:
            expected = list(outputs)
        else:
            result = runtime.model(*runtime.args, **runtime.kwargs)
            expected = [result] if isinstance(result, torch.Tensor) else _tensors(result)
    for op, value in zip(trace.outputs, expected):
        parent = op._info["parents"][0][0] if op._info["parents"] else None
        recorded = values.get(parent)
        if recorded is None or not _same(recorded, value):
            decisions.append((op.index, "failed", "output_mismatch"))
        else:
            decisions.append((op.index, "leaf", "replay_matched"))

    # 2 and 3. Every op, from its parents' saved values.
    with torch.no_grad():
        for op in ops:
            record = runtime.replays.get(op.index)
            if op.kind in ("input",):
                decisions.append((op.index, "leaf", "input_leaf"))
                continue
            if op.kind in ("constant", "buffer"):
                decisions.append((op.index, "leaf", "constant_producer_leaf"))
                continue
            if record is None:
                continue
            parents: List[int] = []
            _slots(record[2], parents)
            _slots(tuple(record[3].values()), parents)
            if op.index not in values or any(parent not in values for parent in parents):
                decisions.append((op.index, "not_replayable", "payload_not_saved"))
                continue
            try:
                replayed = _run(record, values)
            except Exception:
                decisions.append((op.index, "failed", "replay_failed"))
                continue
            if not isinstance(replayed, torch.Tensor) or not _same(replayed, values[op.index]):
                decisions.append((op.index, "failed", "replay_mismatch"))
                continue
            floating = [parent for parent in dict.fromkeys(parents) if values[parent].is_floating_point()]
            if not floating or record[1] in _VALUE_INDEPENDENT:
                decisions.append(
                    (op.index, "passed", "no_perturbable_parent" if not floating else "replay_matched")
                )
                continue
            moved = False
            for parent in floating:
                try:
                    changed = _run(record, values, (parent, _perturbed(values[parent], generator)))
                except Exception:
                    continue
                if not _same(changed, values[op.index]):
                    moved = True
                    break
            decisions.append(
                (op.index, "passed", "replay_matched")
                if moved
                else (op.index, "failed", "parent_perturbation_inert")
            )
    return fold(decisions, labels)


def _tensors(value: Any) -> List[torch.Tensor]:
    from .capture import _flatten

    found: list = []
    _flatten(value, "", found)
    return [tensor for _, tensor in found]
