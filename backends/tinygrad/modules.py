"""Module discovery for callable objects holding tinygrad state (``object_module``), and the
call wrappers that report module calls while the forward runs.

Discovery walks object attributes: a Tensor attribute is a parameter of the object that holds
it; a callable child that owns Tensor attributes (or child modules), or is a ``tinygrad.nn``
layer, is a module; lists, tuples and dicts of modules are container modules (``layers.0``). A
child reachable under several attributes is one module: the first address is primary, the
others are aliases (``all_addresses``). A Tensor reachable twice is one parameter."""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from tinygrad import Tensor

#: Deepest attribute nesting walked.
MAX_DEPTH = 32


@dataclass
class ModuleRecord:
    """One discovered module: its id, its addresses (primary first), the object."""

    module_id: int
    addresses: List[str]
    class_name: str
    container: bool
    obj: Any


@dataclass
class ModuleTree:
    """What discovery found: modules (the root is id 0, ``self``) and parameters
    ``(address, owning module id, tensor)``."""

    modules: List[ModuleRecord] = field(default_factory=list)
    params: List[Tuple[str, int, Any]] = field(default_factory=list)


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
    """The module tree and parameters under ``root`` (module id 0, address ``self``)."""
    tree = ModuleTree()
    tree.modules.append(ModuleRecord(0, ["self"], type(root).__name__, False, root))
    by_object: Dict[int, ModuleRecord] = {id(root): tree.modules[0]}
    seen_tensors: Dict[int, str] = {}

    def add_module(value: Any, address: str, container: bool) -> Optional[ModuleRecord]:
        known = by_object.get(id(value))
        if known is not None:
            if known.module_id != 0:
                known.addresses.append(address)
            return None
        record = ModuleRecord(len(tree.modules), [address], type(value).__name__, container, value)
        tree.modules.append(record)
        by_object[id(value)] = record
        return record

    def visit(value: Any, address: str, owner: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(value, Tensor):
            if id(value) not in seen_tensors:
                seen_tensors[id(value)] = address
                tree.params.append((address, owner, value))
            return
        if isinstance(value, (list, tuple, dict)):
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            relevant = [
                (key, item)
                for key, item in items
                if isinstance(item, (Tensor, list, tuple, dict)) or _is_module(item)
            ]
            if not relevant:
                return
            holder = owner
            if any(_is_module(item) for _, item in relevant):
                record = add_module(value, address, True)
                if record is None:
                    return
                holder = record.module_id
            for key, item in relevant:
                visit(item, f"{address}.{key}", holder, depth + 1)
            return
        if _is_module(value):
            record = add_module(value, address, False)
            if record is None:
                return
            walk(value, address, record.module_id, depth + 1)

    def walk(obj: Any, prefix: str, owner: int, depth: int) -> None:
        for name, value in _attributes(obj).items():
            if name.startswith("__"):
                continue
            visit(value, f"{prefix}.{name}" if prefix else name, owner, depth)

    walk(root, "", 0, 0)
    return tree


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
