"""A minimal TorchLens adapter over NumPy arrays, written the way docs/adapters.md describes. It
lives in the tests, is installed as a plugin (its distribution is ``../pyproject.toml``, which
declares it in the ``torchlens.backends`` entry-point group), and passes the same shared
contract tests as the built-in backends.

Models are :class:`Module` subclasses (or plain callables) that compute with the NumPy functions
in :data:`~numpy_adapter.adapter.WRAPPED` (``np.matmul``, ``np.add``, ``np.tanh``, ...)."""

from .model import Module

__all__ = ["Module"]
