"""The PyTorch backend: capture with a ``TorchFunctionMode`` and global module hooks. Its
declaration (``declaration.py``) imports nothing; the adapter (``adapter.py``) imports torch and
is loaded only when a torch model is traced."""
