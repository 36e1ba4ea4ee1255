"""JAX payloads in a ``.tlspec``: bytes out of and back into ``jax.Array``; typed PRNG keys
(stored as key data, re-wrapped on load); single-host sharded arrays (stored assembled, their
sharding described in the manifest's codec metadata and rebuilt only on request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import jax
import ml_dtypes
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from torchlens.errors import UnsupportedError

from .codec_checks import check_codec_metadata, invalid
from .dtypes import is_key

SHARDING_CODEC_VERSION = 1

_NUMPY_DTYPES = {
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}


@dataclass(frozen=True)
class JaxPayloadLoadHint:
    """How ``tl.load`` materializes JAX payloads: ``sharding`` places every payload saved with
    a sharding on it; ``reconstruct_sharding=True`` rebuilds each saved ``NamedSharding`` on
    the local devices of ``platform``. The default is value-only (single device)."""

    sharding: Any = None
    reconstruct_sharding: bool = False
    platform: Optional[str] = None


def numpy_dtype(name: str) -> np.dtype:
    return _NUMPY_DTYPES.get(name) or np.dtype(name)


def _named_sharding(sharding: Any) -> Optional[dict]:
    if not isinstance(sharding, jax.sharding.NamedSharding):
        return None
    mesh = sharding.mesh
    spec = []
    for entry in sharding.spec:
        if entry is None:
            spec.append(None)
        elif isinstance(entry, tuple):
            spec.append([str(axis) for axis in entry])
        else:
            spec.append(str(entry))
    return {
        "axis_names": [str(name) for name in mesh.axis_names],
        "mesh_shape": [int(size) for size in mesh.devices.shape],
        "partition_spec": spec,
    }


def codec_metadata(trace: Any) -> dict:
    """What the manifest records beyond dtypes: which payloads are typed PRNG keys, and the
    sharding of each payload saved from a sharded array. Multi-host or not fully addressable
    arrays refuse: their values are not all on this host."""
    keys: Dict[str, str] = {}
    shardings: Dict[str, dict] = {}
    for op in trace.ops:
        slot = op._info["payload"]
        if slot is None or slot not in trace._payloads:
            continue
        value = trace._payloads[slot]
        if is_key(value.dtype):
            keys[op.label] = str(jax.random.key_impl(value))
        if not getattr(value, "is_fully_addressable", True):
            raise UnsupportedError(
                f"the value of {op.label} is not fully addressable from this host (multi-host array)",
                "jax_payload_not_addressable",
                "gather the array to one host (multihost_utils.process_allgather) before saving",
            )
        sharding = getattr(value, "sharding", None)
        if sharding is not None and len(sharding.device_set) > 1:
            named = _named_sharding(sharding)
            shardings[op.label] = {
                "jax_sharding_kind": type(sharding).__name__,
                "jax_sharding_device_count": len(sharding.device_set),
                "jax_sharding_platform": next(iter(sharding.device_set)).platform,
                "jax_named_sharding": named,
            }
    metadata: dict = {}
    if keys:
        metadata["jax_prng_keys"] = keys
    if shardings:
        metadata["jax_sharding_version"] = SHARDING_CODEC_VERSION
        metadata["jax_sharding"] = shardings
    return metadata


def _rebuild(named: dict, platform: Optional[str]) -> Any:
    devices = jax.devices(platform) if platform else jax.devices()
    count = int(np.prod(named["mesh_shape"]))
    if len(devices) < count:
        raise UnsupportedError(
            f"the saved sharding needs {count} devices, this host has {len(devices)}",
            "jax_sharding_devices_missing",
            "load value-only (the default), or pass a sharding that fits this host",
        )
    mesh = Mesh(np.array(devices[:count]).reshape(named["mesh_shape"]), tuple(named["axis_names"]))
    spec = [tuple(entry) if isinstance(entry, list) else entry for entry in named["partition_spec"]]
    return NamedSharding(mesh, PartitionSpec(*spec))


def finish_load(payloads: dict, labels: dict, codec: dict, hints: Any) -> dict:
    """Re-wraps typed keys and, when asked, re-applies shardings. Returns the payload load
    status: label → what was materialized."""
    status: Dict[str, str] = {}
    # The metadata came from the file: checked against what JAX accepts before JAX sees any.
    check_codec_metadata(codec, labels.values())
    keys = codec.get("jax_prng_keys", {})
    shardings = codec.get("jax_sharding", {})
    hint = getattr(hints, "jax", None) if hints is not None else None
    for slot, label in labels.items():
        value = payloads[slot]
        if label in keys:
            try:
                payloads[slot] = jax.random.wrap_key_data(value, impl=keys[label])
            except (TypeError, ValueError) as error:
                # Key data of the wrong shape or dtype for its (valid) implementation.
                raise invalid(f"payload {label!r} is no {keys[label]} key: {error}") from None
            status[label] = "typed_key"
            continue
        status[label] = "value"
        saved = shardings.get(label)
        if saved is None or hint is None:
            continue
        if hint.sharding is not None:
            payloads[slot] = jax.device_put(value, hint.sharding)
            status[label] = "sharded"
        elif hint.reconstruct_sharding and saved.get("jax_named_sharding"):
            payloads[slot] = jax.device_put(value, _rebuild(saved["jax_named_sharding"], hint.platform))
            status[label] = "sharded"
    return status
