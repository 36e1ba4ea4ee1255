"""torch dtypes ⇄ the core's framework-neutral dtype names."""

from __future__ import annotations

import torch

NAMES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}
for _attribute, _name in (
    ("uint16", "uint16"),
    ("uint32", "uint32"),
    ("uint64", "uint64"),
    ("float8_e4m3fn", "float8_e4m3"),
    ("float8_e5m2", "float8_e5m2"),
):
    if hasattr(torch, _attribute):
        NAMES[getattr(torch, _attribute)] = _name

BY_NAME = {name: dtype for dtype, name in NAMES.items()}


def name_of(dtype: torch.dtype) -> str:
    """The neutral name; a dtype the core has no name for keeps torch's own."""
    return NAMES.get(dtype) or str(dtype).replace("torch.", "")
