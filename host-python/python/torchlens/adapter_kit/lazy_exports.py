"""The public names of a backend package, imported only when first read, so that importing
``torchlens`` (or reading a backend's declaration) never imports a framework (PEP 562)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple


def lazy_exports(
    package: str, public: Dict[str, str], before_import: Optional[Callable[[], None]] = None
) -> Tuple[Callable[[str], Any], List[str]]:
    """``(__getattr__, __all__)`` for a backend package: ``public`` maps each name to the module
    (relative to ``package``) that defines it; ``before_import`` runs first on every read (a
    check that must refuse before the framework is imported)."""

    def __getattr__(name: str) -> Any:
        module = public.get(name)
        if module is None:
            raise AttributeError(name)
        if before_import is not None:
            before_import()
        return getattr(importlib.import_module(module, package), name)

    return __getattr__, sorted(public)
