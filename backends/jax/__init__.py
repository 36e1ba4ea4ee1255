"""The JAX backend: trace the function to a jaxpr once, then evaluate it equation by equation
with real values, reporting each equation to the core.

Imported only when a JAX function is traced (``import torchlens`` never imports jax)."""

from .backend import BACKEND, PROTOCOL, JaxBackend
from .grads import GradOptions
from .payloads import JaxPayloadLoadHint

__all__ = ["BACKEND", "PROTOCOL", "GradOptions", "JaxBackend", "JaxPayloadLoadHint"]
