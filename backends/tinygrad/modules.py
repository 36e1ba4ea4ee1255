"""Module discovery for callable objects holding tinygrad state (``object_module``); the kit's
``install_module_calls`` reports their calls while the forward runs.

Discovery walks object attributes: a Tensor attribute is a parameter of the object that holds
it; a callable child that owns Tensor attributes (or child modules), or is a ``tinygrad.nn``
layer, is a module; lists, tuples and dicts of modules are container modules (``layers.0``). A
child reachable under several attributes is one module: the first address is primary, the
others are aliases (``all_addresses``). A Tensor reachable twice is one parameter."""

from __future__ import annotations

import types
from typing import Any, Dict

from tinygrad import Tensor

from torchlens.adapter_kit.module_walk import ModuleTree, ObjectTreeRules, discover_tree

#: Deepest attribute nesting walked.
MAX_DEPTH = 32


def _attributes(obj: Any) -> Dict[str, Any]:
    try:
        return dict(vars(obj))
    except TypeError:
        return {}


def _is_layer(value: Any) -> bool:
    return type(value).__module__.startswith("tinygrad.nn")


def _owns_state(value: Any, depth: int = 0) -> bool:
    """Whether an object's attributes hold Tensors, modules, or collections of them."""
    if depth > 3:
        return False
    for item in _attributes(value).values():
        if isinstance(item, Tensor) or _is_module(item, depth + 1):
            return True
        if isinstance(item, (list, tuple)) and any(
            isinstance(entry, Tensor) or _is_module(entry, depth + 1) for entry in item
        ):
            return True
        if isinstance(item, dict) and any(
            isinstance(entry, Tensor) or _is_module(entry, depth + 1) for entry in item.values()
        ):
            return True
    return False


def _is_module(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (type, types.FunctionType, types.MethodType, types.ModuleType, Tensor)):
        return False
    if not callable(value):
        return False
    return _is_layer(value) or _owns_state(value, depth)


def has_module_state(model: Any) -> bool:
    """Whether a callable object has discoverable tinygrad state (the ``object_module``
    default)."""
    return not isinstance(model, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)) and (
        _is_layer(model) or _owns_state(model)
    )


def discover(root: Any) -> ModuleTree:
    """The module tree and parameters under ``root`` (module id 0, address ``self``), through
    object attributes (``__dunder__`` names skipped)."""
    return discover_tree(
        root,
        ObjectTreeRules(
            is_array=lambda value: isinstance(value, Tensor),
            is_module=_is_module,
            children=lambda obj: [
                (name, value) for name, value in _attributes(obj).items() if not name.startswith("__")
            ],
            holds_modules=lambda container: any(
                _is_module(item)
                for item in (container.values() if isinstance(container, dict) else container)
            ),
            max_depth=MAX_DEPTH,
        ),
    )
