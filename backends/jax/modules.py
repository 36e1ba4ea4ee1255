"""Module roots (Equinox ``eqx.Module``, Flax NNX ``nnx.Module``): the module tree, parameter
owners from path-keyed leaves, and attribution of equations through ``jax.named_scope``.

While the root is traced, each module class's ``__call__`` runs inside a named scope
``tlm<module>c<call>``; the scopes end up in every equation's name stack, and the capture turns
changes of that stack into module enter/exit events."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Dict, List, Tuple

import jax

from torchlens.adapter_kit import Patches
from torchlens.adapter_kit.argument_names import argument_names
from torchlens.adapter_kit.module_scopes import scoped_module_calls
from torchlens.adapter_kit.module_walk import ModuleWalk

from .refusals import refuse
from .roots import Root


def _eqx_walk(value: Any, address: str, found: List[Tuple[str, Any, bool]], depth: int = 0) -> None:
    """(address, object, is_container) for every module and module container under ``value``."""
    eqx = sys.modules["equinox"]
    if depth > 64:
        return
    if isinstance(value, eqx.Module):
        found.append((address or "self", value, False))
        for field in dataclasses.fields(value):
            child = getattr(value, field.name, None)
            _eqx_walk(child, f"{address}.{field.name}" if address else field.name, found, depth + 1)
    elif isinstance(value, (list, tuple, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        start = len(found)
        found.append((address, value, True))
        for key, child in items:
            _eqx_walk(child, f"{address}.{key}", found, depth + 1)
        if len(found) == start + 1:
            found.pop()  # a container holding no module is not a module record


def _nnx_walk(model: Any) -> List[Tuple[str, Any, bool]]:
    nnx = sys.modules["flax.nnx"]
    containers = tuple(kind for kind in (getattr(nnx, "List", None), getattr(nnx, "Dict", None)) if kind)
    found = []
    # flax 0.12.0 (the newest flax for JAX 0.7) has no nnx.iter_modules, only the method.
    iter_modules = getattr(nnx, "iter_modules", None) or type(model).iter_modules
    for path, module in iter_modules(model):
        address = ".".join(str(part) for part in path) or "self"
        found.append((address, module, isinstance(module, containers)))
    # iter_modules yields children first; declare parents before their children.
    found.sort(key=lambda entry: (entry[0] != "self", entry[0].count("."), entry[0]))
    return found


def _nnx_paths(model: Any) -> Dict[int, List[str]]:
    """Every address each NNX module is reachable under (a module assigned to two attributes
    is one object in an NNX graph), in discovery order (the kit's ``ModuleWalk``)."""
    nnx = sys.modules["flax.nnx"]

    def children(node: Any) -> List[Tuple[str, Any]]:
        # flax 0.12.0 has no nnx.iter_children, only the Module method.
        found = nnx.iter_children(node) if hasattr(nnx, "iter_children") else node.iter_children()
        return [(str(key), child) for key, child in found if isinstance(child, nnx.Module)]

    return ModuleWalk(model, children).addresses


def walk(model: Any, framework: str) -> List[Tuple[str, Any, bool]]:
    if framework == "equinox":
        found: List[Tuple[str, Any, bool]] = []
        _eqx_walk(model, "", found)
        return found
    return _nnx_walk(model)


def scope_names(eqn: Any) -> List[str]:
    """The names of the scopes open around an equation, outermost first. Structured
    name-stack entries: under a transform the text form reads "outer/vmap(inner)", the entries
    stay Scope("outer"), Transform("vmap"), Scope("inner")."""
    return [getattr(part, "name", "") for part in eqn.source_info.name_stack.stack]


def _scoped_calls(patches: Patches, model: Any, framework: str) -> None:
    """Runs the ``__call__`` of every module under the root inside a ``jax.named_scope``
    naming the module object (by identity, found by walking the rebuilt module tree) and its
    call number (the kit's :func:`~torchlens.adapter_kit.module_scopes.scoped_module_calls`)."""
    scoped_module_calls(patches, walk(model, framework), jax.named_scope)


def module_root(model: Any, framework: str, args: tuple, kwargs: dict, attribute: bool) -> Root:
    """A module root: parameters are the module's array leaves (path-keyed, owned by the
    module whose address is their longest prefix)."""
    names = argument_names(model.__call__, len(args), 0)
    if framework == "equinox":
        params_tree = model
        graphdef = None

        def rebuild(params: Any) -> Any:
            return params

        trainable = None
    else:
        nnx = sys.modules["flax.nnx"]
        graphdef, state = nnx.split(model)
        params_tree = state
        trainable = {
            ".".join(str(part) for part in path): isinstance(variable, nnx.Param)
            for path, variable in nnx.to_flat_state(state)
        }

        def rebuild(params: Any) -> Any:
            return nnx.merge(graphdef, params)

    def call(params: Any, inputs: tuple, keywords: dict) -> Any:
        module = rebuild(params)
        before = jax.tree_util.tree_leaves(params)
        if not attribute:
            return _checked(module(*inputs, **keywords), module, before, framework)
        with Patches() as patches:
            _scoped_calls(patches, module, framework)
            return _checked(module(*inputs, **keywords), module, before, framework)

    root = Root(
        "pytree_module" if attribute else "function_root", params_tree, tuple(args), kwargs, call, names
    )
    root.framework = framework
    root.class_name = type(model).__name__
    # The module's call, its structure (the class and static fields are in the pytree
    # structure; an NNX graph definition is not) and the attribution mode key its trace.
    root.anchors = (type(model).__call__,)
    root.structure = graphdef if framework == "flax_nnx" else None
    root.modules = walk(model, framework) if attribute else [("self", model, False)]
    if framework == "flax_nnx":
        root.params = [(_strip_value(name), value) for name, value in root.params]
    root.trainable = trainable
    root.reachable = _nnx_paths(model) if framework == "flax_nnx" and attribute else {}
    root.scope_names = scope_names if attribute else None
    return root


def _strip_value(name: str) -> str:
    return name[: -len(".value")] if name.endswith(".value") else name


def _checked(output: Any, module: Any, before: list, framework: str) -> Any:
    """Refuses NNX state rebinding: a forward that replaced one of the module's state leaves
    (``before``: the leaves it was called with). A replaced RNG counter means the forward drew
    random numbers (Dropout in training mode), which replay would draw again."""
    if framework == "flax_nnx":
        nnx = sys.modules["flax.nnx"]
        state = nnx.state(module)
        after = jax.tree_util.tree_leaves(state)
        if len(before) != len(after):
            changed = [None]
        else:
            kinds = [type(variable) for _, variable in nnx.to_flat_state(state)]
            if len(kinds) != len(after):
                kinds = [None] * len(after)
            changed = [kind for kind, a, b in zip(kinds, after, before) if a is not b]
        if changed:
            rng_kinds = tuple(
                getattr(nnx, name) for name in ("RngCount", "RngKey", "RngState") if hasattr(nnx, name)
            )
            if all(kind is not None and issubclass(kind, rng_kinds) for kind in changed):
                raise refuse(
                    "the module's forward draws random numbers (an NNX RNG stream advanced)",
                    "rng_state_in_graph",
                    "call model.eval() (or pass deterministic=True) before tracing",
                )
            raise refuse(
                "the module's forward rebinds NNX state (a Variable was assigned a new value)",
                "nested_primitive_unsupported",
                "keep state updates outside the traced forward, or trace a raw fn(state, *inputs)",
            )
    return output
