"""What a ``.tlspec``'s JAX codec metadata may say, checked (by the kit's
:mod:`torchlens.adapter_kit.codec_checks`) before any of it reaches JAX: a PRNG implementation
name goes to ``jax.random.wrap_key_data`` and sharding fields to ``Mesh``/``PartitionSpec`` only
once they are known to be of the shapes :func:`~.payloads.codec_metadata` writes."""

from __future__ import annotations

from typing import Any, Iterable

from torchlens.adapter_kit.codec_checks import CodecChecks, sizes, strings

#: The PRNG implementations ``jax.random.key(impl=...)`` names (and so the only ones
#: ``codec_metadata`` writes, from ``str(jax.random.key_impl(key))``).
PRNG_IMPLEMENTATIONS = frozenset({"threefry2x32", "rbg", "unsafe_rbg"})

#: The keys of one saved sharding entry, with the type each value must have.
_SHARDING_FIELDS = {
    "jax_sharding_kind": str,
    "jax_sharding_device_count": int,
    "jax_sharding_platform": str,
}

CHECKS = CodecChecks(
    "the file's JAX metadata was not written by TorchLens or was altered; save the trace again"
)
invalid = CHECKS.invalid


def check_codec_metadata(codec: dict, labels: Iterable[str]) -> None:
    """Checks the JAX entries of a file's codec metadata against what JAX accepts and against
    the file's payload ``labels``."""
    labels = list(labels)
    for label, impl in CHECKS.by_label(codec, "jax_prng_keys", labels).items():
        if not isinstance(impl, str) or impl not in PRNG_IMPLEMENTATIONS:
            raise invalid(
                f"jax_prng_keys gives {label!r} the PRNG implementation {impl!r}; JAX has "
                f"{', '.join(sorted(PRNG_IMPLEMENTATIONS))}"
            )
    for label, entry in CHECKS.by_label(codec, "jax_sharding", labels).items():
        CHECKS.fields(entry, _SHARDING_FIELDS, f"the sharding of {label!r}")
        named = entry.get("jax_named_sharding")
        if named is not None:
            _check_named(label, named)


def _check_named(label: str, named: Any) -> None:
    if not isinstance(named, dict):
        raise invalid(f"the named sharding of {label!r} is not an object")
    axes = named.get("axis_names")
    spec = named.get("partition_spec")
    if not strings(axes):
        raise invalid(f"the named sharding of {label!r} has axis_names that are not strings")
    if not sizes(named.get("mesh_shape"), len(axes), 1 << 20):
        raise invalid(f"the named sharding of {label!r} has a mesh_shape that fits no mesh of its axes")
    if not isinstance(spec, list) or not all(_spec_entry_ok(part, axes) for part in spec):
        raise invalid(f"the named sharding of {label!r} has a partition_spec naming axes it lacks")


def _spec_entry_ok(part: Any, axes: list) -> bool:
    if part is None:
        return True
    if isinstance(part, str):
        return part in axes
    return isinstance(part, list) and all(isinstance(axis, str) and axis in axes for axis in part)
