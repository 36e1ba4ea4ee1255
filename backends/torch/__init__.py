"""The PyTorch backend: capture with a ``TorchFunctionMode`` and module brackets. Its
declaration (``declaration.py``) imports nothing; the adapter (``adapter.py``) imports torch and
is loaded only when a torch model is traced; ``tl.backends.torch.GradOptions`` imports torch when
first read."""

from torchlens.adapter_kit.lazy_exports import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "GradOptions": ".grads",
        "TorchAdapter": ".adapter",
    },
)
