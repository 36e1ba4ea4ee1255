"""The jaxpr of a root, traced once per call signature, as ``jax.jit`` caches its traces.

Tracing the function to a jaxpr (``jax.make_jaxpr``) runs the user's Python once per op and is
most of a capture's cost; a second capture of the same callable on arguments of the same
structure, shapes and dtypes reuses the jaxpr of the first. The key is what ``jax.jit`` keys
its traces on, taken a little stricter: the callable (by identity, with its closure cells and
default arguments; for module roots the module class and static structure), the pytree
structure of ``(params, inputs, kwargs)`` with every non-array leaf by value, each array leaf's
abstract value (shape, dtype, weak type, sharding), and JAX's trace context (``jax_enable_x64``,
default precision and the other configuration a trace depends on). As with ``jax.jit``, Python
state the function reads without taking it as an argument or closing over it (a global, an
attribute of a captured object changed in place) is read at the first trace only.

A key that cannot be built (an unhashable static leaf) simply traces every time. The cache
itself (weakly anchored entries, least recently used dropped, what each entry derives from its
jaxpr) is the kit's :mod:`torchlens.adapter_kit.program_cache` and the key the kit's
:meth:`~torchlens.adapter_kit.flat_call.FlatCall.signature`; this module gives JAX's abstract
values and trace context."""

from __future__ import annotations

from typing import Any

import jax

from torchlens.adapter_kit.program_cache import Entry, ProgramCache

try:
    from jax._src.config import trace_context as _trace_context
except ImportError:  # pragma: no cover - depends on the installed JAX
    _trace_context = None

#: Entries kept (least recently used dropped first): each holds a jaxpr and its closure constants.
CAPACITY = 64

_CACHE = ProgramCache(CAPACITY)
clear = _CACHE.clear
cached_count = _CACHE.count


def _aval(leaf: Any) -> Any:
    if isinstance(leaf, jax.Array):
        return leaf.aval, leaf.sharding
    return type(leaf), leaf.shape, leaf.dtype


def lookup(root: Any) -> Entry:
    """The cached entry for ``root``'s call (``entry.traced``: the closed jaxpr and the output
    structure), tracing it on a miss."""
    key = None if _trace_context is None else root.signature(_aval, _trace_context())
    return _CACHE.lookup(
        key, root.anchors, lambda: jax.make_jaxpr(root.flat, return_shape=True)(*root.dynamic)
    )
