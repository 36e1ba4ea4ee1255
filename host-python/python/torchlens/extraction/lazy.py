"""``tl.load_extraction``: an extraction folder as lazy per-op arrays. A column maps each shard's
payload for that op with ``numpy.memmap`` when first touched, so ``ex["relu_1_3"][1000:2000]``
reads only the shards (and within them the rows) those 1,000 rows lie in."""

from __future__ import annotations

import bisect
import os
import zlib
from typing import Any, Dict, Iterator, List, Optional

from .. import api
from ..adapter_kit.array_codec import transport_dtype
from ..argument_checks import flag, path_argument
from ..backends import get_backend
from ..errors import ExtractionError, NotFoundError
from ..file_errors import existing_folder
from .index import read_index
from .shards import read_header


class Extraction:
    """A finished extraction: ``ex[label]`` is a :class:`Column` (lazy), ``ex.labels`` the ops,
    ``len(ex)`` the rows, ``ex.index`` the parsed ``index.json``, ``ex.shard_trace(i)`` shard
    ``i`` as a full :class:`~torchlens.Trace`."""

    def __init__(self, path: str, verify: bool = False) -> None:
        self.path = os.path.abspath(path)
        self.index = read_index(self.path)
        shards = self.index["shards"]
        self._starts = [int(shard["row_start"]) for shard in shards]
        self._headers: Dict[int, Dict[str, Any]] = {}
        self._columns: Dict[str, Column] = {}
        if verify:
            self.verify()

    @property
    def labels(self) -> List[str]:
        """The extracted ops' labels."""
        return list(self.index["columns"])

    @property
    def backend(self) -> Optional[str]:
        """The backend that traced the batches."""
        return self.index["backend"]

    def __len__(self) -> int:
        return int(self.index["rows"])

    def __contains__(self, label: str) -> bool:
        return label in self.index["columns"]

    def __iter__(self) -> Iterator[str]:
        return iter(self.labels)

    def keys(self) -> List[str]:
        """The extracted ops' labels (as :attr:`labels`; an extraction reads like a mapping)."""
        return self.labels

    def __getitem__(self, label: str) -> Column:
        if label not in self.index["columns"]:
            raise NotFoundError(
                f"the extraction holds no op {label!r}",
                "extraction_label_unknown",
                f"use one of {', '.join(self.labels)}",
            )
        if label not in self._columns:
            self._columns[label] = Column(self, label)
        return self._columns[label]

    def shard_trace(self, shard: int) -> Any:
        """Shard ``shard`` opened with ``tl.load`` (the whole trace of its batch)."""
        return api.load(os.path.join(self.path, self.index["shards"][shard]["file"]))

    def verify(self) -> None:
        """Checks every payload against the CRC-32 the index records
        (``extraction_payload_checksum_mismatch``)."""
        for position, shard in enumerate(self.index["shards"]):
            for label, expected in shard["crc32"].items():
                data = self[label]._shard_array(position)
                actual = zlib.crc32(memoryview(data.reshape(-1).view("uint8")))
                if actual != expected:
                    raise ExtractionError(
                        f"{shard['file']}: payload {label} has CRC-32 {actual:08x}, "
                        f"the index records {expected:08x}",
                        "extraction_payload_checksum_mismatch",
                        "the shard is damaged: delete it and rerun tl.extract_dataset with the same out=",
                    )

    def _header(self, shard: int) -> Dict[str, Any]:
        if shard not in self._headers:
            path = os.path.join(self.path, self.index["shards"][shard]["file"])
            self._headers[shard] = read_header(path)
        return self._headers[shard]

    def _shard_of(self, row: int) -> int:
        return bisect.bisect_right(self._starts, row) - 1

    def __repr__(self) -> str:
        shards = len(self.index["shards"])
        return f"<Extraction {self.path}: {len(self)} rows, {shards} shards, ops {self.labels}>"


class Column:
    """One op's values over every row, lazily: indexing with an int, a slice or an integer
    array over the rows returns a NumPy array of just those rows (dtypes NumPy lacks come as
    their raw bits: ``bfloat16`` as ``uint16``); ``numpy()`` reads all rows, ``to_backend()``
    gives the backend's tensor (a torch tensor, a JAX array) in the logical dtype."""

    def __init__(self, extraction: Extraction, label: str) -> None:
        self._extraction = extraction
        self.label = label
        layout = extraction.index["columns"][label]
        #: The logical dtype (the core's name, e.g. ``float32``, ``bfloat16``).
        self.dtype: str = layout["dtype"]
        self.row_shape = tuple(int(extent) for extent in layout["row_shape"])
        self._transport = transport_dtype(self.dtype)
        self._maps: Dict[int, Any] = {}

    @property
    def shape(self) -> tuple:
        """``(rows, *value shape)``: the column as one array would be."""
        return (len(self._extraction), *self.row_shape)

    def __len__(self) -> int:
        return len(self._extraction)

    def _shard_array(self, shard: int) -> Any:
        """Shard ``shard``'s rows of this op, memory-mapped read-only."""
        import numpy  # lazy: importing torchlens must not import numpy

        if shard not in self._maps:
            extraction = self._extraction
            entry = extraction.index["shards"][shard]
            header = extraction._header(shard)
            payload = header.get(self.label)
            rows = int(entry["rows"])
            shape = (rows, *self.row_shape)
            expected = int(numpy.prod(shape, dtype=numpy.int64)) * self._transport.itemsize
            if not isinstance(payload, dict) or list(payload.get("shape", [])) != list(shape):
                raise ExtractionError(
                    f"{entry['file']} has no payload {self.label} of shape {list(shape)}",
                    "extraction_shard_mismatch",
                    "the folder was changed after the index was written; rerun tl.extract_dataset",
                )
            start, end = payload["data_offsets"]
            if end - start != expected:
                raise ExtractionError(
                    f"{entry['file']}: payload {self.label} has {end - start} bytes, "
                    f"the index implies {expected}",
                    "extraction_shard_mismatch",
                    "the folder was changed after the index was written; rerun tl.extract_dataset",
                )
            offset = 8 + int(header["__header_length__"]) + int(start)
            path = os.path.join(extraction.path, entry["file"])
            if expected == 0:
                self._maps[shard] = numpy.zeros(shape, dtype=self._transport)
            else:
                self._maps[shard] = numpy.memmap(
                    path, dtype=self._transport, mode="r", offset=offset, shape=shape
                )
        return self._maps[shard]

    def __getitem__(self, key: Any) -> Any:
        import numpy  # lazy: importing torchlens must not import numpy

        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = (key[0], key[1:]) if key else (slice(None), ())
        rows = len(self)
        if isinstance(key, (int, numpy.integer)):
            row = int(key) + rows if key < 0 else int(key)
            if not 0 <= row < rows:
                raise IndexError(f"row {key} is out of range for {rows} rows")
            shard = self._extraction._shard_of(row)
            value = numpy.array(self._shard_array(shard)[row - self._extraction._starts[shard]])
            return value[rest] if rest else value
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(rows)
            value = self._rows_range(start, max(start, stop))
        else:
            value = self._rows_taken(numpy.arange(rows)[key])
        return value[(slice(None), *rest)] if rest else value

    def _rows_range(self, start: int, stop: int) -> Any:
        """Rows ``start:stop``, reading only the shards they lie in."""
        import numpy  # lazy: importing torchlens must not import numpy

        parts = []
        starts = self._extraction._starts
        if stop > start:
            for shard in range(self._extraction._shard_of(start), self._extraction._shard_of(stop - 1) + 1):
                begin = starts[shard]
                parts.append(self._shard_array(shard)[max(start - begin, 0) : stop - begin])
        if not parts:
            return numpy.empty((0, *self.row_shape), dtype=self._transport)
        return numpy.concatenate(parts) if len(parts) > 1 else numpy.array(parts[0])

    def _rows_taken(self, rows: Any) -> Any:
        """Arbitrary rows, in the order asked."""
        import numpy  # lazy: importing torchlens must not import numpy

        result = numpy.empty((len(rows), *self.row_shape), dtype=self._transport)
        starts = numpy.asarray(self._extraction._starts)
        shards = numpy.searchsorted(starts, rows, side="right") - 1
        for shard in numpy.unique(shards):
            where = numpy.nonzero(shards == shard)[0]
            result[where] = self._shard_array(int(shard))[rows[where] - starts[shard]]
        return result

    def numpy(self) -> Any:
        """Every row as one NumPy array (read into memory)."""
        return self[:]

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def to_backend(self, rows: Any = slice(None)) -> Any:
        """``rows`` of this op as the backend's array (``torch.Tensor`` for torch, a JAX array
        for JAX), in the logical dtype (bfloat16 included)."""
        backend = self._extraction.backend
        if not backend:
            raise ExtractionError(
                "the extraction has no rows, so no backend traced it",
                "extraction_empty",
                "use numpy() on an empty extraction",
            )
        return get_backend(backend).from_numpy(self[rows], self.dtype)

    def __repr__(self) -> str:
        shards = len(self._extraction.index["shards"])
        return f"<Column {self.label}: {self.dtype} {list(self.shape)} over {shards} shards>"


def load_extraction(path: str, verify: bool = False) -> Extraction:
    """Opens the output folder of :func:`extract_dataset` (its ``index.json``, written last).
    Values stay on disk until indexed. ``verify=True`` reads every payload once and checks its
    CRC-32 against the index."""
    path = path_argument(path, "path", "activations/")
    existing_folder(
        path,
        "pass the folder tl.extract_dataset wrote (holding index.json); open one .tlspec file with tl.load",
    )
    return Extraction(path, verify=flag(verify, "verify"))
