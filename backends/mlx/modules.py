"""The module tree of an ``mlx.nn.Module`` root (``object_module``) and the call wrappers that
report module calls while the forward runs.

The walk follows MLX's own children (``Module`` is a dict of its attributes), in the order
``named_modules()`` addresses them: a child module is ``name``, a module kept in a list, tuple
or dict is ``name.0`` / ``name.key``, and the list, tuple or dict itself gets its own container
module record (as a torch ``ModuleList`` does). A module reachable under several addresses is
one module: the first address is primary, the others are aliases (``all_addresses``). Arrays
are parameters of the module that holds them (``trainable`` unless frozen)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import mlx.core as mx
import mlx.nn as nn

MAX_DEPTH = 64


@dataclass
class ModuleRecord:
    """One module: its id, addresses (primary first), class name, whether it is a container."""

    module_id: int
    addresses: List[str]
    class_name: str
    container: bool
    obj: Any


@dataclass
class ModuleTree:
    """Modules (the root is id 0, ``self``) and parameters ``(address, module id, array,
    trainable)``."""

    modules: List[ModuleRecord] = field(default_factory=list)
    params: List[Tuple[str, int, Any, bool]] = field(default_factory=list)
    by_object: Dict[int, int] = field(default_factory=dict)


def _holds_modules(value: Any, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if isinstance(value, nn.Module):
        return True
    if isinstance(value, dict):
        return any(_holds_modules(item, depth + 1) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_modules(item, depth + 1) for item in value)
    return False


def discover(root: Any) -> ModuleTree:
    """The module tree and parameters under ``root`` (module id 0, address ``self``)."""
    tree = ModuleTree()
    tree.modules.append(ModuleRecord(0, ["self"], type(root).__name__, False, root))
    tree.by_object[id(root)] = 0
    trainable = {id(array) for _, array in _flatten(root.trainable_parameters())}
    seen_arrays: set = set()

    def add(value: Any, address: str, container: bool) -> int:
        known = tree.by_object.get(id(value))
        if known is not None:
            if known != 0:
                tree.modules[known].addresses.append(address)
            return -1
        record = ModuleRecord(len(tree.modules), [address], type(value).__name__, container, value)
        tree.modules.append(record)
        tree.by_object[id(value)] = record.module_id
        return record.module_id

    def visit(value: Any, address: str, owner: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(value, mx.array):
            if id(value) not in seen_arrays:
                seen_arrays.add(id(value))
                tree.params.append((address, owner, value, id(value) in trainable))
            return
        if isinstance(value, nn.Module):
            module_id = add(value, address, False)
            if module_id >= 0:
                walk(value, address, module_id, depth + 1)
            return
        if isinstance(value, (list, tuple, dict)):
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            holder = owner
            if _holds_modules(value):
                holder = add(value, address, True)
                if holder < 0:
                    return
            for key, item in items:
                visit(item, f"{address}.{key}", holder, depth + 1)

    def walk(module: Any, prefix: str, owner: int, depth: int) -> None:
        for name, value in module.items():
            visit(value, f"{prefix}.{name}" if prefix else name, owner, depth)

    walk(root, "", 0, 0)
    return tree


def _flatten(tree: Any, prefix: str = "") -> List[Tuple[str, Any]]:
    from mlx.utils import tree_flatten

    return tree_flatten(tree)


def call_owners(tree: ModuleTree) -> List[type]:
    """The classes whose ``__call__`` runs the calls of the tree's modules (one per class
    that defines it)."""
    owners: List[type] = []
    for record in tree.modules:
        if record.container:
            continue
        for klass in type(record.obj).__mro__:
            if "__call__" in vars(klass):
                if klass not in owners and klass is not object:
                    owners.append(klass)
                break
    return owners


def install_calls(
    patches: Any,
    tree: ModuleTree,
    on_call: Callable[[Callable[..., Any], Any, int, tuple, dict], Any],
) -> None:
    """Wraps ``__call__`` of every module class of the tree: a call of a module in the tree
    runs through ``on_call(original, module, module id, args, kwargs)``."""
    by_object = tree.by_object
    for klass in call_owners(tree):
        original = vars(klass)["__call__"]

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def call(module: Any, *args: Any, **kwargs: Any) -> Any:
                module_id = by_object.get(id(module))
                if module_id is None or module_id == 0:
                    return original(module, *args, **kwargs)
                return on_call(original, module, module_id, args, kwargs)

            return call

        patches.replace(klass, "__call__", patches.for_owner_thread(make(original), original))
