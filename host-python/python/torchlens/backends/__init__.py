"""Backends: one adapter per framework behind one contract. Each backend declares a
:class:`BackendSpec` (discovered, see :mod:`.registry`) and implements
:class:`BackendProtocol` (:mod:`torchlens.adapter_kit`). An adapter imports its framework only
when first used, so ``import torchlens`` imports no framework.

``REFUSAL_CODES`` and ``VALIDATION_REASONS`` are the closed sets the core defines."""

from __future__ import annotations

import importlib
from typing import Any

from ..adapter_kit.protocol import BackendProtocol
from ..capability_gate import capability_names, gate, refusal_codes, validation_reasons
from .registry import (
    ENTRY_POINT_GROUP,
    array_frameworks,
    check_registration,
    find_spec,
    get_backend,
    get_spec,
    names,
    register_backend,
    require_framework,
    resolve,
    specs,
    unregister_backend,
)
from .spec import BackendSpec, FrameworkRequirement

__all__ = [
    "ENTRY_POINT_GROUP",
    "REFUSAL_CODES",
    "VALIDATION_REASONS",
    "BackendProtocol",
    "BackendSpec",
    "FrameworkRequirement",
    "array_frameworks",
    "capability_names",
    "check_registration",
    "find_spec",
    "gate",
    "get_backend",
    "get_spec",
    "names",
    "refusal_codes",
    "register_backend",
    "require_framework",
    "resolve",
    "specs",
    "unregister_backend",
    "validation_reasons",
]


def __getattr__(name: str) -> Any:
    # The closed sets come from the core, loaded on first access (not at import).
    if name == "REFUSAL_CODES":
        return frozenset(refusal_codes())
    if name == "VALIDATION_REASONS":
        return frozenset(validation_reasons())
    spec = find_spec(name)
    if spec is not None and spec.adapter is not None:
        # tl.backends.jax: the adapter package (imports its framework now, on first access).
        require_framework(spec)
        return importlib.import_module(f"{__name__}.{spec.name}")
    raise AttributeError(name)
