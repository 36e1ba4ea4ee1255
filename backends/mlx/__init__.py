"""The MLX backend: an inventory of wrapped ``mlx.core`` functions, ``mx.array`` methods and
operators, and ``mlx.nn.Module`` calls, installed for the duration of one forward and always
removed; every recorded value is realized in one ``mx.eval`` after the forward returns
(realize-once). Its declaration (``declaration.py``) imports nothing;
``tl.backends.mlx.GradOptions`` imports MLX when first read."""

from __future__ import annotations

from torchlens.adapter_kit.lazy_exports import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "GradOptions": ".grads",
        "MlxAdapter": ".adapter",
    },
)
