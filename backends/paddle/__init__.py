"""The PaddlePaddle backend: dygraph capture through wrapped kernels (``paddle._C_ops``), C++
tensor operators and ``paddle.nn.Layer.__call__``. Its declaration (``declaration.py``) imports
nothing; ``tl.backends.paddle.GradOptions`` imports Paddle when first read."""

from __future__ import annotations

from torchlens.adapter_kit.lazy_exports import lazy_exports

from .refusals import check_import_order


def _check_import_order() -> None:
    check_import_order()  # Paddle crashes when first imported after TensorFlow


__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "GradOptions": ".grads",
        "PaddleAdapter": ".adapter",
    },
    before_import=_check_import_order,
)
