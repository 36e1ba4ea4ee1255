"""The PyTorch backend: capture with a ``TorchFunctionMode`` and global module hooks.

Imported only when a torch model is traced (``import torchlens`` never imports torch)."""

from .backend import BACKEND, PROTOCOL, TorchBackend

__all__ = ["BACKEND", "PROTOCOL", "TorchBackend"]
