"""What a ``.tlspec``'s JAX codec metadata may say, checked before any of it reaches JAX. The
manifest comes from the file, so from anyone: a PRNG implementation name goes to
``jax.random.wrap_key_data`` and sharding fields to ``Mesh``/``PartitionSpec`` only once they
are known to be of the shapes :func:`~.payloads.codec_metadata` writes. Anything else is a
``.tlspec`` error with a code (``tlspec_codec_metadata_invalid``), never JAX's own
``TypeError`` or ``ValueError``."""

from __future__ import annotations

from typing import Any, Iterable

from torchlens.errors import TlspecFormatError
from torchlens.terminal_text import shown

#: The PRNG implementations ``jax.random.key(impl=...)`` names (and so the only ones
#: ``codec_metadata`` writes, from ``str(jax.random.key_impl(key))``).
PRNG_IMPLEMENTATIONS = frozenset({"threefry2x32", "rbg", "unsafe_rbg"})

#: The keys of one saved sharding entry, with the type each value must have.
_SHARDING_FIELDS = {
    "jax_sharding_kind": str,
    "jax_sharding_device_count": int,
    "jax_sharding_platform": str,
}

_REMEDY = "the file's JAX metadata was not written by TorchLens or was altered; save the trace again"


def invalid(message: str) -> TlspecFormatError:
    """The error for codec metadata JAX must not be handed."""
    return TlspecFormatError(shown(message), "tlspec_codec_metadata_invalid", _REMEDY)


def check_codec_metadata(codec: dict, labels: Iterable[str]) -> None:
    """Checks the JAX entries of a file's codec metadata against what JAX accepts and against
    the file's payload ``labels``."""
    known = set(labels)
    keys = codec.get("jax_prng_keys", {})
    if not isinstance(keys, dict):
        raise invalid("jax_prng_keys is not an object")
    for label, impl in keys.items():
        if label not in known:
            raise invalid(f"jax_prng_keys names {label!r}, which is no payload of the file")
        if not isinstance(impl, str) or impl not in PRNG_IMPLEMENTATIONS:
            raise invalid(
                f"jax_prng_keys gives {label!r} the PRNG implementation {impl!r}; JAX has "
                f"{', '.join(sorted(PRNG_IMPLEMENTATIONS))}"
            )
    shardings = codec.get("jax_sharding", {})
    if not isinstance(shardings, dict):
        raise invalid("jax_sharding is not an object")
    for label, entry in shardings.items():
        if label not in known:
            raise invalid(f"jax_sharding names {label!r}, which is no payload of the file")
        _check_sharding(label, entry)


def _check_sharding(label: str, entry: Any) -> None:
    if not isinstance(entry, dict):
        raise invalid(f"the sharding of {label!r} is not an object")
    for field, kind in _SHARDING_FIELDS.items():
        if field in entry and (not isinstance(entry[field], kind) or isinstance(entry[field], bool)):
            raise invalid(f"the sharding of {label!r} has a {field} that is not a {kind.__name__}")
    named = entry.get("jax_named_sharding")
    if named is None:
        return
    if not isinstance(named, dict):
        raise invalid(f"the named sharding of {label!r} is not an object")
    axes = named.get("axis_names")
    shape = named.get("mesh_shape")
    spec = named.get("partition_spec")
    if not (isinstance(axes, list) and all(isinstance(axis, str) for axis in axes)):
        raise invalid(f"the named sharding of {label!r} has axis_names that are not strings")
    if not (
        isinstance(shape, list)
        and len(shape) == len(axes)
        and all(
            isinstance(size, int) and not isinstance(size, bool) and 0 < size <= 1 << 20 for size in shape
        )
    ):
        raise invalid(f"the named sharding of {label!r} has a mesh_shape that fits no mesh of its axes")
    if not isinstance(spec, list) or not all(_spec_entry_ok(part, axes) for part in spec):
        raise invalid(f"the named sharding of {label!r} has a partition_spec naming axes it lacks")


def _spec_entry_ok(part: Any, axes: list) -> bool:
    if part is None:
        return True
    if isinstance(part, str):
        return part in axes
    return isinstance(part, list) and all(isinstance(axis, str) and axis in axes for axis in part)
