"""The postcard encoding of an ``EventBatch`` (schema/src/events.rs), written from Python.

The native host builds batches with the Rust schema crate; this host has no Rust, so it writes
the same bytes itself. Postcard is small: unsigned integers are LEB128 varints, ``bool`` one
byte, ``Option`` a 0/1 byte then the value, strings and sequences a varint length then the
items, an enum a varint variant index then its fields, structs their fields in order. The
variant indices below are the declaration order of ``RawEvent`` and ``Dtype``; the schema's own
tests pin the tags (``earlier_variants_keep_their_tags_and_edit_comes_last``) and
tests/test_wasmtime_host.py checks these bytes against the native host's ingest.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

from ...dtypes import CORE_DTYPES

_SMALL = [bytes((value,)) for value in range(128)]

# RawEvent variant indices (schema/src/events.rs).
_MODULE, _PARAM, _INPUT, _BUFFER, _CONSTANT, _OP, _ENTER, _EXIT, _OUTPUT, _EXTRA, _EDIT = (
    _SMALL[index] for index in range(11)
)

# Dtype variant indices (schema/src/dtype.rs); any other name is `Other(name)`.
_DTYPES = {name: _SMALL[index] for index, name in enumerate(CORE_DTYPES)}
_DTYPE_OTHER = len(CORE_DTYPES)

_NONE = b"\x00"
_SOME = b"\x01"
_FALSE = b"\x00"
_TRUE = b"\x01"


def varint(value: int) -> bytes:
    """An unsigned integer as a LEB128 varint."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"postcard varints are unsigned, got {value}")
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def text(value: str) -> bytes:
    """A string: its UTF-8 length as a varint, then the bytes."""
    encoded = value.encode("utf-8")
    return varint(len(encoded)) + encoded


def dtype(name: str) -> bytes:
    """A ``Dtype``: its variant index, or ``Other`` with the name."""
    tag = _DTYPES.get(name)
    return tag if tag is not None else varint(_DTYPE_OTHER) + text(name)


def _shape(shape: Sequence[int]) -> bytes:
    return varint(len(shape)) + b"".join([varint(extent) for extent in shape])


def _payload(slot: Optional[int]) -> bytes:
    return _NONE if slot is None else _SOME + varint(slot)


def tensor_desc(tensor: int, shape: Sequence[int], dtype_name: str, payload: Optional[int]) -> bytes:
    """A ``TensorDesc``: id, shape, dtype, payload slot."""
    return varint(tensor) + _shape(shape) + dtype(dtype_name) + _payload(payload)


def _strings(values: Iterable[str]) -> bytes:
    items = [text(value) for value in values]
    return varint(len(items)) + b"".join(items)


def module(id: int, addresses: List[str], class_name: str, container: bool, training: bool) -> bytes:
    return (
        _MODULE
        + varint(id)
        + _strings(addresses)
        + text(class_name)
        + (_TRUE if container else _FALSE)
        + (_TRUE if training else _FALSE)
    )


def param(
    tensor: int, address: str, module_id: int, shape: Sequence[int], dtype_name: str, trainable: bool
) -> bytes:
    return (
        _PARAM
        + varint(tensor)
        + text(address)
        + varint(module_id)
        + _shape(shape)
        + dtype(dtype_name)
        + (_TRUE if trainable else _FALSE)
    )


def input(name: str, tensor: int, shape: Sequence[int], dtype_name: str, payload: Optional[int]) -> bytes:
    return _INPUT + text(name) + tensor_desc(tensor, shape, dtype_name, payload)


def buffer(address: str, tensor: int, shape: Sequence[int], dtype_name: str, payload: Optional[int]) -> bytes:
    return _BUFFER + text(address) + tensor_desc(tensor, shape, dtype_name, payload)


def constant(tensor: int, shape: Sequence[int], dtype_name: str, payload: Optional[int]) -> bytes:
    return _CONSTANT + tensor_desc(tensor, shape, dtype_name, payload)


def op(
    func: str,
    args: Sequence[Tuple[int, int]],
    outputs: Sequence[Tuple[int, Sequence[int], str, Optional[int]]],
    in_place: bool,
    attributes: Sequence[Tuple[str, str]],
    source: Optional[Tuple[str, int, str]],
) -> bytes:
    """An ``OpEvent``; arguments carry no keyword name (the native host sends none either)."""
    parts = [_OP, text(func), varint(len(args))]
    for tensor, position in args:
        parts += (varint(tensor), varint(position), _NONE)
    parts.append(varint(len(outputs)))
    for tensor, shape, dtype_name, payload in outputs:
        parts.append(tensor_desc(tensor, shape, dtype_name, payload))
    parts.append(_TRUE if in_place else _FALSE)
    parts.append(varint(len(attributes)))
    for key, value in attributes:
        parts += (text(key), text(value))
    if source is None:
        parts.append(_NONE)
    else:
        file, line, function = source
        parts += (_SOME, text(file), varint(line), text(function))
    return b"".join(parts)


def enter(module_id: int) -> bytes:
    return _ENTER + varint(module_id)


def exit(module_id: int, outputs: Sequence[int]) -> bytes:
    return _EXIT + varint(module_id) + varint(len(outputs)) + b"".join([varint(value) for value in outputs])


def output(name: str, tensor: int) -> bytes:
    return _OUTPUT + text(name) + varint(tensor)


def extra(key: str, value: str) -> bytes:
    return _EXTRA + text(key) + text(value)


def edit(value: int, rule: str, action: str, timing: str) -> bytes:
    return _EDIT + varint(value) + text(rule) + text(action) + text(timing)


def batch(events: List[bytes]) -> bytes:
    """An ``EventBatch``: the event count, then the encoded events."""
    return varint(len(events)) + b"".join(events)
