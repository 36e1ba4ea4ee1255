"""The batches of a job, whatever ``data`` is: one array of rows (cut into ``batch_size``
rows), a Hugging Face ``datasets.Dataset`` or a ``ray.data.Dataset`` (read in batches of
``batch_size`` rows, in order), or any other iterable, whose items are the batches as given (a
torch ``DataLoader`` batches itself). A batch becomes the model's inputs: a tuple or list is
the positional inputs, a dict the keyword inputs, anything else the one input."""

from __future__ import annotations

import zlib
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Tuple

from ..adapter_kit.array_codec import host_array, payload_bytes
from ..errors import ExtractionError


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and len(getattr(value, "shape", ())) > 0


def _is_hf_dataset(data: Any) -> bool:
    module = type(data).__module__ or ""
    return module.startswith("datasets.") and hasattr(data, "iter") and hasattr(data, "with_format")


def _is_ray_dataset(data: Any) -> bool:
    module = type(data).__module__ or ""
    return module.startswith("ray.data") and hasattr(data, "iter_batches")


def iterate_batches(data: Any, batch_size: int) -> Iterator[Any]:
    """The job's batches in order (see the module docstring)."""
    if _is_array(data):
        rows = int(data.shape[0])
        for start in range(0, rows, batch_size):
            yield data[start : start + batch_size]
    elif _is_hf_dataset(data):
        yield from data.with_format("numpy").iter(batch_size=batch_size)
    elif _is_ray_dataset(data):
        yield from data.iter_batches(batch_size=batch_size, batch_format="numpy")
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        yield from data
    else:
        raise ExtractionError(
            f"data of type {type(data).__name__} is neither an array of rows nor an iterable of batches",
            "extraction_data_invalid",
            "pass an array with a leading row dimension, a DataLoader, a datasets.Dataset, "
            "a ray.data.Dataset or any iterable of batches",
        )


def total_rows(data: Any) -> Optional[int]:
    """The number of rows, where ``data`` says it without being read (for the progress ETA)."""
    if _is_array(data):
        return int(data.shape[0])
    dataset = getattr(data, "dataset", None)  # a torch DataLoader
    if dataset is not None and hasattr(dataset, "__len__") and getattr(data, "drop_last", False) is False:
        try:
            return len(dataset)
        except TypeError:
            return None
    if _is_hf_dataset(data):
        return len(data)
    return None


def model_inputs(batch: Any, inputs: Optional[Callable[[Any], Any]]) -> Tuple[tuple, Dict[str, Any]]:
    """``(positional, keyword)`` inputs of the model for one batch (after ``inputs=``)."""
    value = inputs(batch) if inputs is not None else batch
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    return (value,), {}


def input_crc32(args: tuple, kwargs: Dict[str, Any]) -> int:
    """CRC-32 of every input array's bytes (C order), in argument order then sorted keyword
    order: a rerun checks a finished shard was made from the same batch before skipping it."""
    crc = 0
    leaves = list(args) + [kwargs[key] for key in sorted(kwargs)]
    for leaf in _leaves(leaves):
        if _is_array(leaf) or hasattr(leaf, "__dlpack__"):
            array = host_array(_detached(leaf))
            crc = zlib.crc32(f"{array.dtype.str}{tuple(array.shape)}".encode(), crc)
            crc = zlib.crc32(payload_bytes(array), crc)
        else:
            crc = zlib.crc32(repr(leaf).encode(), crc)
    return crc


def _detached(value: Any) -> Any:
    # A torch tensor that requires grad refuses NumPy views; the digest needs only its values.
    detach = getattr(value, "detach", None)
    if callable(detach) and type(value).__module__.startswith("torch"):
        detached = detach()
        to_host = getattr(detached, "cpu", None)
        value = to_host() if callable(to_host) else detached
    return value


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key])
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value
