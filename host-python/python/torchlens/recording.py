"""What ``tl.record`` returns: the values of the selected ops, named by the labels ``tl.trace``
gives, the model's output, and what names each value (function, module call, shape, dtype).
Framework-neutral: values are whatever arrays the backend produced."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Sequence, Tuple, Union

from .errors import NotFoundError


class ActivationRecord:
    """One selected op of a recorded forward pass: its final ``label``, ``func_name``,
    innermost module call ``module`` (``address:call``, ``self:1`` for the root), ``shape``,
    neutral ``dtype`` name and its value ``out`` (``ram_payload`` is the same value, under the
    reference implementation's name)."""

    __slots__ = ("label", "func_name", "module", "shape", "dtype", "out")

    def __init__(
        self, label: str, func_name: str, module: str, shape: Sequence[int], dtype: str, out: Any
    ) -> None:
        self.label = label
        self.func_name = func_name
        self.module = module
        self.shape = tuple(shape)
        self.dtype = dtype
        self.out = out

    @property
    def ram_payload(self) -> Any:
        """The recorded value (the reference implementation's name for ``out``)."""
        return self.out

    def __repr__(self) -> str:
        shape = list(self.shape)
        return f"<ActivationRecord {self.label} {self.func_name} {shape} {self.dtype} in {self.module}>"


class Recording:
    """The selected values of one forward pass (``tl.record``), in capture order, and the
    model's ``output``. ``recording["relu_1_3"]`` (or ``recording[0]``) is an
    :class:`ActivationRecord`; ``recording["relu_1_3"].out`` its value.

    ``from_plan`` says how the values were taken: True when a plan learned on an earlier call
    recorded them without building a trace, False when this call ran a full ``tl.trace`` (the
    first call for a model and input signature, or a plan that no longer matched the model)."""

    def __init__(self, records: List[ActivationRecord], output: Any, backend: str, from_plan: bool) -> None:
        self.records = records
        self.output = output
        self.backend = backend
        self.from_plan = from_plan
        self.by_label: Dict[str, ActivationRecord] = {record.label: record for record in records}

    @property
    def labels(self) -> List[str]:
        """The labels of the recorded ops, in capture order."""
        return [record.label for record in self.records]

    @property
    def n_records(self) -> int:
        """How many ops were recorded."""
        return len(self.records)

    def values(self) -> Dict[str, Any]:
        """Label → recorded value, in capture order."""
        return {record.label: record.out for record in self.records}

    def __getitem__(self, key: Union[int, str]) -> ActivationRecord:
        if isinstance(key, int):
            return self.records[key]
        record = self.by_label.get(key)
        if record is None:
            raise NotFoundError(
                f"no recorded op is labelled {key!r}",
                "label_not_found",
                "see recording.labels for the ops save= selected",
            )
        return record

    def __contains__(self, key: object) -> bool:
        return key in self.by_label

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[ActivationRecord]:
        return iter(self.records)

    def summary(self) -> str:
        """One line per recorded op: label, function, module call, shape, dtype."""
        rows: List[Tuple[str, ...]] = [("label", "function", "module", "shape", "dtype")]
        rows += [
            (record.label, record.func_name, record.module, str(list(record.shape)), record.dtype)
            for record in self.records
        ]
        widths = [max(len(row[column]) for row in rows) for column in range(5)]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
        )

    def __repr__(self) -> str:
        how = "plan" if self.from_plan else "trace"
        return f"<Recording {self.backend}: {len(self.records)} records, from {how}>"


__all__ = ["ActivationRecord", "Recording"]
