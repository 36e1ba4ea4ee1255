"""The tinygrad backend: record every tensor-visible UOp while the lazy graph is built, then
realize every recorded value in one evaluation after the forward returns (realize-once). Its
declaration (``declaration.py``) imports nothing; ``tl.backends.tinygrad.GradOptions`` imports
tinygrad when first read."""

from __future__ import annotations

from torchlens.adapter_kit.lazy_exports import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "GradOptions": ".grads",
        "TinygradAdapter": ".adapter",
    },
)
