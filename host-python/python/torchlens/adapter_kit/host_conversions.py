"""Host copies and payload bytes, written once for every backend whose arrays convert to and
from NumPy. The backend supplies four conversions (:class:`HostConversions`); the kit handles
the dtypes NumPy lacks (``bfloat16``, the float8 formats): their payloads travel as raw bits of
the same width, and host views widen them to ``float32``."""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy

from . import array_codec


class HostConversions:
    """A mixin of :class:`~torchlens.adapter_kit.protocol.BackendProtocol`: ``to_numpy``,
    ``from_numpy``, ``payload_bytes`` and ``finish_load`` over the framework's conversions."""

    array_type: Any

    def neutral_dtype(self, value: Any) -> str:
        raise NotImplementedError

    # ---- the framework's conversions ---------------------------------------------------------

    def array_to_host(self, value: Any) -> numpy.ndarray:
        """A NumPy array of a framework array of a dtype NumPy has (its ``numpy()``, which most
        frameworks' arrays have; a lazy array is evaluated by it)."""
        return value.numpy()

    def array_from_host(self, array: numpy.ndarray) -> Any:
        """A framework array of a NumPy array (same dtype)."""
        raise NotImplementedError

    def cast(self, value: Any, dtype: str) -> Any:
        """``value`` converted to the core dtype ``dtype``."""
        raise NotImplementedError

    def reinterpret(self, value: Any, dtype: str) -> Any:
        """``value``'s bits read as the core dtype ``dtype`` of the same width."""
        raise NotImplementedError

    def held_array(self, value: Any) -> Any:
        """The array a value holds now (a framework whose parameters are variables reads the
        variable's current value); the value itself by default."""
        return value

    def payload_refusal(self, dtype: str) -> Optional[Exception]:
        """The refusal of saving a payload of ``dtype`` (one with no array encoding, such as
        strings or handles), or None."""
        return None

    # ---- the protocol's host copies and payload codec -----------------------------------------

    def to_numpy(self, value: Any) -> numpy.ndarray:
        """A host NumPy array of a value; ``bfloat16`` and float8 widen to ``float32``."""
        value = self.held_array(value)
        if not isinstance(value, self.array_type):
            return numpy.asarray(value)
        if array_codec.is_bit_carrier(self.neutral_dtype(value)):
            value = self.cast(value, "float32")
        return self.array_to_host(value)

    def from_numpy(self, array: Any, dtype: str, like: Any = None) -> Any:
        if array_codec.is_bit_carrier(dtype):
            if array.dtype.kind == "u":
                # Raw bits of a dtype NumPy lacks (bfloat16 travels as uint16): reinterpret them.
                return self.reinterpret(self.array_from_host(numpy.ascontiguousarray(array)), dtype)
            return self.cast(self.array_from_host(numpy.asarray(array, dtype=numpy.float32)), dtype)
        return self.array_from_host(numpy.array(array, dtype=numpy.dtype(dtype), order="C"))

    def payload_bytes(self, value: Any) -> memoryview:
        """The value's bytes in C order (a dtype NumPy lacks as its raw bits); a dtype with no
        array encoding refuses (:meth:`payload_refusal`)."""
        value = self.held_array(value)
        dtype = self.neutral_dtype(value)
        refusal = self.payload_refusal(dtype)
        if refusal is not None:
            raise refusal
        if array_codec.is_bit_carrier(dtype):
            bits = self.reinterpret(value, array_codec.transport_dtype(dtype).name)
            return array_codec.payload_bytes(self.array_to_host(bits))
        return array_codec.payload_bytes(self.array_to_host(value))

    def finish_load(self, payloads: dict, labels: dict, codec: dict, hints: Any) -> Dict[str, str]:
        """Every payload loads back as a framework array."""
        return {label: "value" for label in labels.values()}
