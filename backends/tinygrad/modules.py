"""Module discovery for callable objects holding tinygrad state (``object_module``), and the
call wrappers that report module calls while the forward runs.

Discovery walks object attributes: a Tensor attribute is a parameter of the object that holds
it; a callable child that owns Tensor attributes (or child modules), or is a ``tinygrad.nn``
layer, is a module; lists, tuples and dicts of modules are container modules (``layers.0``). A
child reachable under several attributes is one module: the first address is primary, the
others are aliases (``all_addresses``). A Tensor reachable twice is one parameter."""

from __future__ import annotations

import types
from typing import Any, Callable, Dict, List

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


class CallReporter:
    """Wraps ``__call__`` of every discovered module class for the capture, so that each call
    of a discovered module reports ``enter`` and ``exit`` events (ops built in between are
    attributed to it). Calls of other instances of those classes pass through."""

    def __init__(self, tree: ModuleTree, session: Any, output_ids: Callable[[Any], List[int]]) -> None:
        self.session = session
        self.output_ids = output_ids
        self.ids = {id(record.obj): record.module_id for record in tree.modules[1:] if not record.container}
        self.classes = []
        for record in tree.modules[1:]:
            cls = type(record.obj)
            if not record.container and cls not in self.classes and cls is not type(tree.modules[0].obj):
                self.classes.append(cls)
        self.active: List[int] = []

    def install(self, patches: Any) -> None:
        for cls in self.classes:
            patches.wrap(cls, "__call__", self._wrap)

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        reporter = self

        def call(module: Any, *args: Any, **kwargs: Any) -> Any:
            index = reporter.ids.get(id(module))
            if index is None or (reporter.active and reporter.active[-1] == index):
                return original(module, *args, **kwargs)
            reporter.session.enter(index)
            reporter.active.append(index)
            try:
                output = original(module, *args, **kwargs)
            finally:
                reporter.active.pop()
            reporter.session.exit(index, reporter.output_ids(output))
            return output

        return call
