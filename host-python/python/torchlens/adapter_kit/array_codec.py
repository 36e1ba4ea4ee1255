"""The payload codec of ``payload_policy="array_payloads"``, for every backend whose values can
be seen as NumPy arrays (through DLPack where the framework offers it, so no copy is made).

On disk a payload is its elements in C order. Dtypes NumPy has no native type for travel as
bits of the same width and keep their logical dtype in the file: ``bfloat16`` as ``uint16``,
the float8 formats as ``uint8``. An adapter turns the transport array back into its own dtype.
A dtype name the core does not list is refused, never read as raw bytes."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from ..errors import TlspecFormatError

#: Logical dtype → (NumPy transport dtype name, whether the transport is a bit-carrier).
_TRANSPORT: Dict[str, Tuple[str, bool]] = {
    "bool": ("bool", False),
    "uint8": ("uint8", False),
    "int8": ("int8", False),
    "int16": ("int16", False),
    "uint16": ("uint16", False),
    "int32": ("int32", False),
    "uint32": ("uint32", False),
    "int64": ("int64", False),
    "uint64": ("uint64", False),
    "float16": ("float16", False),
    "float32": ("float32", False),
    "float64": ("float64", False),
    "complex64": ("complex64", False),
    "complex128": ("complex128", False),
    "bfloat16": ("uint16", True),
    "float8_e4m3": ("uint8", True),
    "float8_e5m2": ("uint8", True),
}


def transport_dtype(dtype: str) -> Any:
    """The NumPy dtype a payload of logical ``dtype`` travels as (``payload_dtype_unknown`` for
    a name the core does not list)."""
    import numpy  # lazy: importing torchlens imports no numpy

    entry = _TRANSPORT.get(dtype)
    if entry is None:
        raise TlspecFormatError(
            f"a payload has dtype {dtype!r}, which this TorchLens cannot decode",
            "payload_dtype_unknown",
            "open the file with the TorchLens version that wrote it, or re-save the trace",
        )
    return numpy.dtype(entry[0])


def is_bit_carrier(dtype: str) -> bool:
    """Whether ``dtype`` travels as raw bits of an unsigned integer of the same width."""
    entry = _TRANSPORT.get(dtype)
    return entry is not None and entry[1]


def host_array(value: Any) -> Any:
    """A NumPy view of a host-resident array: DLPack first (zero copy), then ``__array__``."""
    import numpy  # lazy: importing torchlens imports no numpy

    if isinstance(value, numpy.ndarray):
        return value
    try:
        return numpy.from_dlpack(value)
    except (TypeError, ValueError, RuntimeError, BufferError, AttributeError):
        return numpy.asarray(value)


def payload_bytes(array: Any) -> memoryview:
    """The bytes of a NumPy array in C order (a copy only when it is not contiguous)."""
    import numpy  # lazy: importing torchlens imports no numpy

    flat = numpy.ascontiguousarray(array).reshape(-1)
    return flat.view(numpy.uint8).data.cast("B")


def array_from_buffer(buffer: Any, offset: int, length: int, dtype: str, shape: list) -> Any:
    """A zero-copy NumPy array over ``length`` bytes of ``buffer`` at ``offset``, in the
    transport dtype of ``dtype`` (``uint16`` for ``bfloat16``)."""
    import numpy  # lazy: importing torchlens imports no numpy

    transport = transport_dtype(dtype)
    count = 1
    for extent in shape:
        count *= int(extent)
    if count * transport.itemsize != length:
        raise TlspecFormatError(
            f"a {dtype} payload of shape {list(shape)} needs {count * transport.itemsize} bytes, "
            f"the file has {length}",
            "payload_length_mismatch",
            "the file is damaged; run `tlspec check` on it and save the trace again",
        )
    if length == 0:
        return numpy.zeros(shape, dtype=transport)
    return numpy.frombuffer(buffer, dtype=transport, count=count, offset=offset).reshape(shape)
