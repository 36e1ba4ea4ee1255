"""Both directions between a framework's dtypes and the core's dtype names, for frameworks whose
dtype objects are attributes of one namespace (``<framework>.float32``, or
``<framework>.dtypes.float32``). A backend names only where its framework spells a core dtype
differently (``float8_e4m3fn``, ``fp8e4m3``)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ..dtypes import CORE_DTYPES


class DtypeNames:
    """A framework's dtypes under their core names. ``namespace`` holds the dtype objects;
    ``spellings`` maps a core name to the framework's attribute name where they differ. A core
    dtype the framework lacks is left out (asking for it raises ``KeyError``)."""

    def __init__(self, namespace: Any, spellings: Optional[Mapping[str, str]] = None) -> None:
        spellings = spellings or {}
        #: Core name → the framework's dtype.
        self.framework: Dict[str, Any] = {}
        #: The framework's dtype → core name (dtype objects are hashable in every framework).
        self.core: Dict[Any, str] = {}
        for name in CORE_DTYPES:
            dtype = getattr(namespace, spellings.get(name, name), None)
            if dtype is not None:
                self.framework[name] = dtype
                self.core.setdefault(dtype, name)

    def core_name(self, dtype: Any) -> str:
        """The core's name of a framework dtype; one the core has no name for keeps the
        framework's (its text after the last dot: ``dtypes.index`` → ``index``)."""
        name = self.core.get(dtype)
        return name if name is not None else str(dtype).rsplit(".", 1)[-1]

    def framework_dtype(self, name: str) -> Any:
        """The framework's dtype of a core dtype name."""
        return self.framework[name]
