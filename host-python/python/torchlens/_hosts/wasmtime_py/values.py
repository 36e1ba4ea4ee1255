"""Component values ⇄ Python values, for the functions of one component, built once per type.

The ``wasmtime`` package converts each value by asking the C API for its type again on every
call, and a ``list<u8>`` element by element in Python (a 10 MB event batch took minutes). Here
each WIT type is turned once into a pair of closures (lower: Python → C value, lift: C value →
Python) that know their field names and cases, and byte lists are moved with slice copies: the
C API holds a ``list<u8>`` as an array of 32-byte tagged values, so the bytes are strided into
(or out of) that array by C-level slice assignment, a chunk at a time.

Python shapes: records are dicts keyed by field name with ``-`` turned into ``_``; tuples are
tuples; variants are ``(case, payload)``; enums are their case name; options are the value or
None; results are ``(True, ok)`` or ``(False, err)``; ``list<u8>`` is ``bytes``; resources are
``wasmtime.component.ResourceAny``.

This module reads ``wasmtime``'s C bindings (``wasmtime._ffi``), which follow the C API of the
pinned ``wasmtime`` major version (see pyproject's ``wasmtime`` pin).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Callable, Dict, Literal, Tuple

from wasmtime import _ffi as ffi
from wasmtime import component as wc

#: Lowers a Python value into the C value at a pointer.
Lower = Callable[[Any, Any, Any], None]
#: Lifts the C value (a ``wasmtime_component_val_t``) at an address into a Python value.
Lift = Callable[[Any], Any]

_VAL_SIZE = ctypes.sizeof(ffi.wasmtime_component_val_t)
_PAYLOAD_OFFSET = ffi.wasmtime_component_val_t.of.offset
_BYTES_CHUNK = 1 << 16
# Lifting reads the C values straight from memory (one `string_at` and `unpack_from` per value
# instead of a chain of ctypes attribute objects): a value is its kind byte then a payload at
# _PAYLOAD_OFFSET; vectors and lists are (size, data pointer); records are arrays of (name,
# value) entries; variants (name, value pointer); results (is_ok, value pointer).
_ENTRY_SIZE = ctypes.sizeof(ffi.wasmtime_component_valrecord_entry_t)
_ENTRY_VALUE = ffi.wasmtime_component_valrecord_entry_t.val.offset
_VARIANT_VALUE = _PAYLOAD_OFFSET + ffi.wasmtime_component_valvariant_t.__dict__["val"].offset
_RESULT_VALUE = _PAYLOAD_OFFSET + ffi.wasmtime_component_valresult_t.__dict__["val"].offset
_VECTOR = struct.Struct("<QQ")  # wasm_byte_vec_t and the value lists: (size, data pointer)
_POINTER = struct.Struct("<Q")
_READ = ctypes.string_at


def _python_name(name: str) -> str:
    return name.replace("-", "_")


_SCALAR_CODES = {"boolean": "?", "u8": "B", "u16": "H", "u32": "I", "u64": "Q", "s8": "b", "s16": "h"}
_SCALAR_CODES.update({"s32": "i", "s64": "q", "f32": "f", "f64": "d"})
#: The layout of each scalar lift, which records read in place instead of calling the lift.
_SCALAR_LAYOUTS: Dict[Callable[[int], Any], struct.Struct] = {}


def _scalar(kind: Any, field: str) -> Tuple[Lower, Lift]:
    kind_value = kind.value
    layout = struct.Struct("<" + _SCALAR_CODES[field])
    size = _PAYLOAD_OFFSET + layout.size
    unpack = layout.unpack_from

    def lower(store: Any, value: Any, pointer: Any) -> None:
        contents = pointer.contents
        contents.kind = kind_value
        setattr(contents.of, field, value)

    def lift(address: int) -> Any:
        return unpack(_READ(address, size), _PAYLOAD_OFFSET)[0]

    _SCALAR_LAYOUTS[lift] = layout  # read in place by records (_record)

    return lower, lift


def _lower_bytes(store: Any, value: Any, pointer: Any) -> None:
    data = bytes(value)
    count = len(data)
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, count)
    if count:
        base = ctypes.cast(raw.data, ctypes.c_void_p).value or 0
        scratch = bytearray(min(count, _BYTES_CHUNK) * _VAL_SIZE)
        scratch[0::_VAL_SIZE] = bytes((ffi.WASMTIME_COMPONENT_U8.value,)) * (len(scratch) // _VAL_SIZE)
        for start in range(0, count, _BYTES_CHUNK):
            chunk = data[start : start + _BYTES_CHUNK]
            size = len(chunk) * _VAL_SIZE
            scratch[_PAYLOAD_OFFSET:size:_VAL_SIZE] = chunk
            ctypes.memmove(base + start * _VAL_SIZE, (ctypes.c_char * size).from_buffer(scratch), size)
    contents = pointer.contents
    contents.kind = ffi.WASMTIME_COMPONENT_LIST.value
    contents.of.list = raw


def _vector(address: int) -> Tuple[int, int]:
    """The (size, data pointer) of a string, enum name or value list at ``address``."""
    return _VECTOR.unpack_from(_READ(address + _PAYLOAD_OFFSET, _VECTOR.size))


def _lift_bytes(address: int) -> bytes:
    count, base = _vector(address)
    if not count:
        return b""
    parts = []
    for start in range(0, count, _BYTES_CHUNK):
        size = min(_BYTES_CHUNK, count - start) * _VAL_SIZE
        parts.append(ctypes.string_at(base + start * _VAL_SIZE, size)[_PAYLOAD_OFFSET::_VAL_SIZE])
    return b"".join(parts)


#: The struct format characters of the integer lists records carry.
ScalarCode = Literal["I", "Q", "i"]


def _scalar_list_lift(code: ScalarCode) -> Lift:
    """Lifts a list of fixed-size integers by reading the C array's payload slots as one
    strided view (op records carry ancestor and descendant lists as long as the trace)."""
    width = ctypes.sizeof({"I": ctypes.c_uint32, "Q": ctypes.c_uint64, "i": ctypes.c_int32}[code])
    stride = _VAL_SIZE // width
    first = _PAYLOAD_OFFSET // width

    def lift(address: int) -> list:
        count, base = _vector(address)
        if not count:
            return []
        view = memoryview(ctypes.string_at(base, count * _VAL_SIZE)).cast(code)
        return view[first::stride].tolist()

    return lift


def _list(element_type: Any) -> Tuple[Lower, Lift]:
    if isinstance(element_type, wc.U8):
        return _lower_bytes, _lift_bytes
    codes: Dict[type, ScalarCode] = {wc.U32: "I", wc.U64: "Q", wc.S32: "i"}
    scalar_code = codes.get(type(element_type))
    lower_element, lift_element = converters(element_type)
    list_kind = ffi.WASMTIME_COMPONENT_LIST.value

    def lower(store: Any, value: Any, pointer: Any) -> None:
        items = list(value)
        raw = ffi.wasmtime_component_vallist_t()
        ffi.wasmtime_component_vallist_new_uninit(raw, len(items))
        data = raw.data
        for index, item in enumerate(items):
            lower_element(store, item, ctypes.pointer(data[index]))
        contents = pointer.contents
        contents.kind = list_kind
        contents.of.list = raw

    def lift(address: int) -> list:
        count, base = _vector(address)
        return [lift_element(base + index * _VAL_SIZE) for index in range(count)]

    return lower, (_scalar_list_lift(scalar_code) if scalar_code else lift)


def _record(fields: list) -> Tuple[Lower, Lift]:
    names = [name for name, _ in fields]
    keys = [_python_name(name) for name in names]
    pairs = [converters(field_type) for _, field_type in fields]
    lowers = [pair[0] for pair in pairs]
    lifts = [pair[1] for pair in pairs]
    encoded_names = [name.encode() for name in names]
    record_kind = ffi.WASMTIME_COMPONENT_RECORD.value
    plan = list(zip(keys, lifts))
    # Scalars and strings are read from one copy of the record's entries; other fields lift
    # from their own address.
    readers = []
    for index, (key, field_lift) in enumerate(plan):
        offset = index * _ENTRY_SIZE + _ENTRY_VALUE + _PAYLOAD_OFFSET
        if field_lift is _lift_string:
            readers.append((key, None, offset, None))
        elif field_lift in _SCALAR_LAYOUTS:
            readers.append((key, _SCALAR_LAYOUTS[field_lift].unpack_from, offset, None))
        else:
            readers.append((key, None, offset - _PAYLOAD_OFFSET, field_lift))
    block_size = len(plan) * _ENTRY_SIZE
    unpack_vector = _VECTOR.unpack_from

    def lower(store: Any, value: Any, pointer: Any) -> None:
        raw = ffi.wasmtime_component_valrecord_t()
        ffi.wasmtime_component_valrecord_new_uninit(raw, len(keys))
        data = raw.data
        for index, key in enumerate(keys):
            entry = data[index]
            lowers[index](store, value[key], ctypes.pointer(entry.val))
            entry.name = ffi.bytes_to_capi(encoded_names[index])
        contents = pointer.contents
        contents.kind = record_kind
        contents.of.record = raw

    def lift(address: int) -> dict:
        base = _vector(address)[1]
        block = _READ(base, block_size)
        out = {}
        for key, unpack, offset, field_lift in readers:
            if field_lift is not None:
                out[key] = field_lift(base + offset)
            elif unpack is not None:
                out[key] = unpack(block, offset)[0]
            else:
                size, data = unpack_vector(block, offset)
                out[key] = _READ(data, size).decode("utf-8") if size else ""
        return out

    return lower, lift


def _tuple(elements: list) -> Tuple[Lower, Lift]:
    pairs = [converters(element) for element in elements]
    tuple_kind = ffi.WASMTIME_COMPONENT_TUPLE.value

    def lower(store: Any, value: Any, pointer: Any) -> None:
        raw = ffi.wasmtime_component_valtuple_t()
        ffi.wasmtime_component_valtuple_new_uninit(raw, len(pairs))
        data = raw.data
        for index, ((element_lower, _), item) in enumerate(zip(pairs, value)):
            element_lower(store, item, ctypes.pointer(data[index]))
        contents = pointer.contents
        contents.kind = tuple_kind
        contents.of.tuple = raw

    def lift(address: int) -> tuple:
        base = _vector(address)[1]
        return tuple(pair[1](base + index * _VAL_SIZE) for index, pair in enumerate(pairs))

    return lower, lift


def _boxed(store: Any, lower: Lower, value: Any) -> Any:
    raw = ffi.wasmtime_component_val_t()
    lower(store, value, ctypes.pointer(raw))
    return ffi.wasmtime_component_val_new(ctypes.byref(raw))


def _variant(cases: list) -> Tuple[Lower, Lift]:
    table = {name: (converters(case_type) if case_type is not None else None) for name, case_type in cases}
    variant_kind = ffi.WASMTIME_COMPONENT_VARIANT.value

    def lower(store: Any, value: Any, pointer: Any) -> None:
        case, payload = value
        pair = table[case]
        contents = pointer.contents
        contents.kind = variant_kind
        contents.of.variant.discriminant = ffi.str_to_capi(case)
        contents.of.variant.val = _boxed(store, pair[0], payload) if pair is not None else None

    def lift(address: int) -> tuple:
        case = _lift_string(address)
        pair = table[case]
        if pair is None:
            return case, None
        return case, pair[1](_POINTER.unpack_from(_READ(address + _VARIANT_VALUE, 8))[0])

    return lower, lift


def _enum(names: list) -> Tuple[Lower, Lift]:
    enum_kind = ffi.WASMTIME_COMPONENT_ENUM.value
    known = set(names)

    def lower(store: Any, value: Any, pointer: Any) -> None:
        if value not in known:
            raise ValueError(f"{value!r} is not one of {sorted(known)}")
        contents = pointer.contents
        contents.kind = enum_kind
        contents.of.enumeration = ffi.str_to_capi(value)

    def lift(address: int) -> str:
        return _lift_string(address)

    return lower, lift


def _option(payload_type: Any) -> Tuple[Lower, Lift]:
    payload_lower, payload_lift = converters(payload_type)
    option_kind = ffi.WASMTIME_COMPONENT_OPTION.value

    def lower(store: Any, value: Any, pointer: Any) -> None:
        contents = pointer.contents
        contents.kind = option_kind
        contents.of.option = _boxed(store, payload_lower, value) if value is not None else None

    def lift(address: int) -> Any:
        pointer = _POINTER.unpack_from(_READ(address + _PAYLOAD_OFFSET, 8))[0]
        return payload_lift(pointer) if pointer else None

    return lower, lift


def _result(ok_type: Any, err_type: Any) -> Tuple[Lower, Lift]:
    ok = converters(ok_type) if ok_type is not None else None
    err = converters(err_type) if err_type is not None else None
    result_kind = ffi.WASMTIME_COMPONENT_RESULT.value

    def lower(store: Any, value: Any, pointer: Any) -> None:
        is_ok, payload = value
        pair = ok if is_ok else err
        contents = pointer.contents
        contents.kind = result_kind
        contents.of.result.is_ok = is_ok
        contents.of.result.val = _boxed(store, pair[0], payload) if pair is not None else None

    def lift(address: int) -> tuple:
        is_ok = _READ(address + _PAYLOAD_OFFSET, 1) != b"\x00"
        pair = ok if is_ok else err
        if pair is None:
            return is_ok, None
        return is_ok, pair[1](_POINTER.unpack_from(_READ(address + _RESULT_VALUE, 8))[0])

    return lower, lift


def _resource(borrowed: bool) -> Tuple[Lower, Lift]:
    resource_kind = ffi.WASMTIME_COMPONENT_RESOURCE.value

    def lower(store: Any, value: Any, pointer: Any) -> None:
        contents = pointer.contents
        contents.kind = resource_kind
        # A borrow leaves the handle with its owner; an own moves it into the call.
        contents.of.resource = (
            ffi.wasmtime_component_resource_any_clone(value.ptr()) if borrowed else value._consume()
        )

    def lift(address: int) -> Any:
        raw = ctypes.cast(address, ctypes.POINTER(ffi.wasmtime_component_val_t)).contents
        resource = wc.ResourceAny._from_ptr(ffi.take_pointer(raw.of, "resource"))
        # The handle now belongs to the Python object: the caller's final delete of the whole
        # result must not free it again.
        raw.kind = ffi.WASMTIME_COMPONENT_BOOL.value
        return resource

    return lower, lift


_SCALARS = {
    wc.Bool: (ffi.WASMTIME_COMPONENT_BOOL, "boolean"),
    wc.U8: (ffi.WASMTIME_COMPONENT_U8, "u8"),
    wc.U16: (ffi.WASMTIME_COMPONENT_U16, "u16"),
    wc.U32: (ffi.WASMTIME_COMPONENT_U32, "u32"),
    wc.U64: (ffi.WASMTIME_COMPONENT_U64, "u64"),
    wc.S8: (ffi.WASMTIME_COMPONENT_S8, "s8"),
    wc.S16: (ffi.WASMTIME_COMPONENT_S16, "s16"),
    wc.S32: (ffi.WASMTIME_COMPONENT_S32, "s32"),
    wc.S64: (ffi.WASMTIME_COMPONENT_S64, "s64"),
    wc.F32: (ffi.WASMTIME_COMPONENT_F32, "f32"),
    wc.F64: (ffi.WASMTIME_COMPONENT_F64, "f64"),
}


def _lower_string(store: Any, value: Any, pointer: Any) -> None:
    contents = pointer.contents
    contents.kind = ffi.WASMTIME_COMPONENT_STRING.value
    contents.of.string = ffi.str_to_capi(value)


def _lift_string(address: int) -> str:
    size, data = _vector(address)
    return _READ(data, size).decode("utf-8") if size else ""


def converters(value_type: Any) -> Tuple[Lower, Lift]:
    """The (lower, lift) pair for one component value type."""
    scalar = _SCALARS.get(type(value_type))
    if scalar is not None:
        return _scalar(*scalar)
    if isinstance(value_type, wc.String):
        return _lower_string, _lift_string
    if isinstance(value_type, wc.ListType):
        return _list(value_type.element)
    if isinstance(value_type, wc.RecordType):
        return _record(value_type.fields)
    if isinstance(value_type, wc.TupleType):
        return _tuple(value_type.elements)
    if isinstance(value_type, wc.EnumType):
        return _enum(value_type.names)
    if isinstance(value_type, wc.OptionType):
        return _option(value_type.payload)
    if isinstance(value_type, wc.ResultType):
        return _result(value_type.ok, value_type.err)
    if isinstance(value_type, wc.VariantType):
        return _variant(value_type.cases)
    if isinstance(value_type, wc.OwnType):
        return _resource(borrowed=False)
    if isinstance(value_type, wc.BorrowType):
        return _resource(borrowed=True)
    raise TypeError(f"the core's WIT has no {type(value_type).__name__} values")
