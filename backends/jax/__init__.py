"""The JAX backend: trace the function to a jaxpr once, then evaluate it equation by equation
with real values, reporting each equation to the core. Its declaration (``declaration.py``)
imports nothing; ``tl.backends.jax.GradOptions`` and ``JaxPayloadLoadHint`` import jax when
first read."""

from __future__ import annotations

from torchlens.adapter_kit.lazy_exports import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "GradOptions": ".grads",
        "JaxPayloadLoadHint": ".payloads",
        "JaxAdapter": ".adapter",
    },
)
