"""The module tree of an ``mlx.nn.Module`` root (``object_module``) and the call wrappers that
report module calls while the forward runs.

The walk follows MLX's own children (``Module`` is a dict of its attributes), in the order
``named_modules()`` addresses them: a child module is ``name``, a module kept in a list, tuple
or dict is ``name.0`` / ``name.key``, and the list, tuple or dict itself gets its own container
module record (as a torch ``ModuleList`` does). A module reachable under several addresses is
one module: the first address is primary, the others are aliases (``all_addresses``). Arrays
are parameters of the module that holds them (``trainable`` unless frozen)."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

import mlx.core as mx
import mlx.nn as nn

from torchlens.adapter_kit.module_walk import ModuleTree, ObjectTreeRules, discover_tree

MAX_DEPTH = 64


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
    """The module tree and parameters under ``root`` (module id 0, address ``self``), through
    MLX's own children (a Module is a dict of its attributes)."""
    trainable = {id(array) for _, array in _flatten(root.trainable_parameters())}
    return discover_tree(
        root,
        ObjectTreeRules(
            is_array=lambda value: isinstance(value, mx.array),
            is_module=lambda value: isinstance(value, nn.Module),
            children=lambda module: module.items(),
            holds_modules=_holds_modules,
            trainable=lambda array: id(array) in trainable,
            max_depth=MAX_DEPTH,
        ),
    )


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
