"""The TensorFlow backend: eager capture through TensorFlow's op callbacks, Keras
``Layer.__call__`` and ``tf.Module`` call frames; graph-only entries through the FuncGraph static
importer. Its declaration (``declaration.py``) imports nothing; ``tl.backends.tf.GradOptions``
and ``TFAdapter`` import TensorFlow when first read."""

from __future__ import annotations

from torchlens.adapter_kit.lazy_exports import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "GradOptions": ".grads",
        "TFAdapter": ".adapter",
    },
)
