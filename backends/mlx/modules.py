"""The module tree of an ``mlx.nn.Module`` root (``object_module``), found by the kit's
``discover_tree``; the kit's ``install_module_calls`` reports its calls while the forward runs.

The walk follows MLX's own children (``Module`` is a dict of its attributes), in the order
``named_modules()`` addresses them: a child module is ``name``, a module kept in a list, tuple
or dict is ``name.0`` / ``name.key``, and the list, tuple or dict itself gets its own container
module record (as a torch ``ModuleList`` does). A module reachable under several addresses is
one module: the first address is primary, the others are aliases (``all_addresses``). Arrays
are parameters of the module that holds them (``trainable`` unless frozen)."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from torchlens.adapter_kit.module_walk import ModuleTree, ObjectTreeRules, discover_tree

MAX_DEPTH = 64


def discover(root: Any) -> ModuleTree:
    """The module tree and parameters under ``root`` (module id 0, address ``self``), through
    MLX's own children (a Module is a dict of its attributes)."""
    trainable = {id(array) for _, array in tree_flatten(root.trainable_parameters())}
    return discover_tree(
        root,
        ObjectTreeRules(
            is_array=lambda value: isinstance(value, mx.array),
            is_module=lambda value: isinstance(value, nn.Module),
            children=lambda module: module.items(),
            trainable=lambda array: id(array) in trainable,
            max_depth=MAX_DEPTH,
        ),
    )
