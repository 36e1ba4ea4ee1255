"""How the capture runs one equation: the primitive's own eager executable, called directly.

``Primitive.bind`` on concrete arrays ends in ``dispatch.apply_primitive``, which looks up (by
hashing the parameters) the compiled single-primitive executable JAX keeps for it and calls it;
the lookup and the trace bookkeeping around it cost most of the ~20 µs of an eager bind. A
:class:`Step` looks the executable up once per equation and then calls it, with the arguments
canonicalized as ``bind`` canonicalizes them: the same executable on the same arguments, so every
value is bit-identical to an eager bind. A primitive whose bind does anything else (its own
``bind_with_trace``, an impl that is not ``apply_primitive``, higher-order parameters), an
unhashable parameter, or JAX internals this version lacks, keep the plain bind."""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Tuple

try:  # JAX internals: without them every equation keeps the plain bind.
    from jax._src import config as _config
    from jax._src import core as _core
    from jax._src import dispatch as _dispatch
    from jax._src.dtypes import canonicalize_value as _canonicalize
except ImportError:  # pragma: no cover - depends on the installed JAX
    _dispatch = None


from torchlens.adapter_kit.program_import import Step as KitStep

from .compat import bind_params
from .dtypes import describe_aval, keyed


class Bind:
    """Re-runs one primitive with its equation's parameters; always returns a list. This is
    what replay and derived gradients call (``bind`` also works on tracers)."""

    __slots__ = ("primitive", "params", "subfuns")

    def __init__(self, primitive: Any, params: dict, subfuns: tuple = ()) -> None:
        # subfuns: the leading callables older JAX's bind takes (see compat.bind_params).
        self.primitive, self.params, self.subfuns = primitive, params, subfuns

    def __call__(self, *args: Any) -> list:
        out = self.primitive.bind(*self.subfuns, *args, **self.params)
        return list(out) if self.primitive.multiple_results else [out]


class Step(KitStep):
    """One plain equation, prepared once per jaxpr: its replay call, its rendered attributes and,
    where the bind is a plain eager dispatch, the executable that dispatch calls."""

    __slots__ = ("executable", "multiple")

    def __init__(self, eqn: Any, attributes: list) -> None:
        primitive = eqn.primitive
        subfuns, params = bind_params(primitive, eqn.params)
        self.name: str = primitive.name
        self.replay = Bind(primitive, params, subfuns)
        self.multiple: bool = primitive.multiple_results
        self.attributes = attributes
        #: Each output's (shape, neutral dtype) from the jaxpr's types, or None when an output is
        #: a typed PRNG key (described from its value, with its implementation).
        self.described: Optional[List[Tuple[list, str]]] = None
        if not any(keyed(var.aval.dtype) for var in eqn.outvars):
            self.described = [describe_aval(var.aval) for var in eqn.outvars]
        #: The compiled single-primitive callable ``apply_primitive`` would call, or None.
        self.executable: Optional[Callable[..., Any]] = _executable(primitive, params)

    def run(self, args: list, fast: bool) -> list:
        """The equation's outputs on concrete ``args`` (a list); ``fast=False`` binds."""
        executable = self.executable
        if executable is None or not fast:
            return self.replay(*args)
        out = executable(*map(_canonicalize, args))
        return list(out) if self.multiple else [out]


def _executable(primitive: Any, params: dict) -> Optional[Callable[..., Any]]:
    if _dispatch is None or not _plain_bind(primitive):
        return None
    if any(isinstance(value, (_core.Jaxpr, _core.ClosedJaxpr)) for value in params.values()):
        return None  # a higher-order primitive (its bind may lower to another representation)
    try:
        return _dispatch.xla_primitive_callable(primitive, **params)
    except TypeError:  # an unhashable parameter: apply_primitive could not cache it either
        return None


def _plain_bind(primitive: Any) -> bool:
    """Whether binding ``primitive`` on concrete arrays is exactly ``apply_primitive``."""
    impl = getattr(primitive, "impl", None)
    if not (
        isinstance(impl, functools.partial)
        and impl.func is _dispatch.apply_primitive
        and impl.args == (primitive,)
        and not impl.keywords
    ):
        return False
    kind = type(primitive)
    return (
        "bind_with_trace" not in vars(primitive)
        and "bind" not in vars(primitive)
        and kind.bind is _core.Primitive.bind
        and kind.bind_with_trace is _core.Primitive.bind_with_trace
    )


def direct_dispatch_allowed() -> bool:
    """Whether this capture may call executables directly: not under ``jax.disable_jit`` (where
    ``apply_primitive`` switches jit back on around the call) nor key-reuse checking (which wraps
    every impl call)."""
    if _dispatch is None:
        return False
    return not (_config.disable_jit.value or _config.debug_key_reuse.value)
