"""How a torch callable is named in the trace."""

from __future__ import annotations

from typing import Any, Dict, Tuple

#: Callable → (its name, whether it writes in place): the function mode asks on every op.
_DESCRIPTIONS: Dict[Any, Tuple[str, bool]] = {}


def func_name(func: Any) -> str:
    """``relu`` for torch.relu, F.relu and Tensor.relu; ``__add__`` for ``+``; the attribute
    name for tensor properties (``T``, ``mT``)."""
    return describe(func)[0]


def describe(func: Any) -> Tuple[str, bool]:
    """``(func_name(func), is_in_place(that name))``, computed once per callable."""
    try:
        return _DESCRIPTIONS[func]
    except (KeyError, TypeError):
        pass
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":
        # A property such as Tensor.T: name it after the attribute.
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    description = (name, is_in_place(name))
    try:
        _DESCRIPTIONS[func] = description
    except TypeError:
        pass
    return description


#: Torch functions that write into their first argument without a trailing underscore.
IN_PLACE_DUNDERS = frozenset(
    {
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__imatmul__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__setitem__",
    }
)


def is_in_place(name: str) -> bool:
    """Whether a function name denotes an in-place op (``add_``, ``__iadd__``, ``__setitem__``)."""
    return name in IN_PLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))
