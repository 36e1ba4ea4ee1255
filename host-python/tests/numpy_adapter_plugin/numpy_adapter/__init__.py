"""A minimal TorchLens adapter over NumPy arrays, written the way docs/adapters.md describes. It
lives in the tests, is declared through the ``torchlens.backends`` entry-point group (the
distribution in ``numpy_adapter_distribution/``), and passes the same shared contract tests as
torch and JAX.

Models are :class:`Module` subclasses (or plain callables) that compute with the NumPy functions
in :data:`~numpy_adapter.adapter.WRAPPED` (``np.matmul``, ``np.add``, ``np.tanh``, ...)."""

from .model import Module

__all__ = ["Module"]
