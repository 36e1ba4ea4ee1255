"""The core's dtype names, in the declaration order of the schema's ``Dtype`` enum
(``schema/src/dtype.rs``): the names a trace and a ``.tlspec`` record, and, by position, the
variant index the wasmtime-py host writes for each. Any other dtype travels by its own name."""

from __future__ import annotations

CORE_DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float8_e4m3",
    "float8_e5m2",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
