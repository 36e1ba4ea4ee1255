"""Module roots (Equinox ``eqx.Module``, Flax NNX ``nnx.Module``): the module tree, parameter
owners from path-keyed leaves, and attribution of equations through ``jax.named_scope``.

While the root is traced, each module class's ``__call__`` runs inside a named scope
``tlm<module>c<call>``; the scopes end up in every equation's name stack, and the capture turns
changes of that stack into module enter/exit events."""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any, Dict, List, Tuple

import jax

from torchlens.adapter_kit import Patches
from torchlens.adapter_kit.module_walk import ModuleRecord, ModuleTree, install_module_calls

from .refusals import refuse
from .roots import Root, argument_names

_SCOPE = re.compile(r"^tlm(\d+)c(\d+)$")


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
    is one object in an NNX graph), in discovery order."""
    nnx = sys.modules["flax.nnx"]
    paths: Dict[int, List[str]] = {}

    def visit(node: Any, address: str, depth: int) -> None:
        if depth > 64:
            return
        known = paths.get(id(node))
        if known is not None:
            known.append(address)
            return
        paths[id(node)] = [address]
        # flax 0.12.0 has no nnx.iter_children, only the Module method.
        children = nnx.iter_children(node) if hasattr(nnx, "iter_children") else node.iter_children()
        for key, child in children:
            if isinstance(child, nnx.Module):
                visit(child, f"{address}.{key}" if address else str(key), depth + 1)

    visit(model, "", 0)
    return paths


def walk(model: Any, framework: str) -> List[Tuple[str, Any, bool]]:
    if framework == "equinox":
        found: List[Tuple[str, Any, bool]] = []
        _eqx_walk(model, "", found)
        return found
    return _nnx_walk(model)


class Scopes:
    """Turns the module scopes in equations' name stacks into enter/exit events."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.open: List[Tuple[int, int, int]] = []  # (module id, call, first equation)

    def hook(self, jaxpr: Any):
        eqns = jaxpr.eqns
        last_use: Dict[Any, int] = {}
        for index, eqn in enumerate(eqns):
            for atom in eqn.invars:
                if not hasattr(atom, "val"):
                    last_use[atom] = index
        for atom in jaxpr.outvars:
            if not hasattr(atom, "val"):
                last_use[atom] = len(eqns)
        self.eqns, self.last_use = eqns, last_use

        def on_equation(eqn: Any, index: int, env: dict) -> None:
            wanted = []
            # Structured name-stack entries: under a transform the text form reads
            # "outer/vmap(inner)", the entries stay Scope("outer"), Transform("vmap"), Scope("inner").
            for part in eqn.source_info.name_stack.stack:
                match = _SCOPE.match(getattr(part, "name", ""))
                if match and match.group(1) != "0":  # the root's own call is already open
                    wanted.append((int(match.group(1)), int(match.group(2))))
            keep = 0
            while keep < len(self.open) and keep < len(wanted) and self.open[keep][:2] == wanted[keep]:
                keep += 1
            self._close(keep, index, env)
            for module, call in wanted[keep:]:
                self.session.enter(module)
                self.open.append((module, call, index))

        return on_equation

    def _close(self, keep: int, index: int, env: dict) -> None:
        while len(self.open) > keep:
            module, _, first = self.open.pop()
            outputs = []
            for eqn in self.eqns[first:index]:
                for var in eqn.outvars:
                    if self.last_use.get(var, -1) >= index and var in env and env[var][1] is not None:
                        outputs.append(env[var][1])
            self.session.exit(module, outputs)

    def close(self, env: dict) -> None:
        self._close(0, len(self.eqns), env)


def _scoped_calls(patches: Patches, model: Any, framework: str) -> None:
    """Runs the ``__call__`` of every module under the root (the kit's ``install_module_calls``)
    inside a named scope naming the module object (by identity, found by walking the rebuilt
    module tree) and its call number; the patches restore the classes, also when tracing
    raises. A module that calls itself again through a base class's ``__call__`` is one call."""
    found = walk(model, framework)
    tree = ModuleTree(
        [
            ModuleRecord(index, [address], "", container, module)
            for index, (address, module, container) in enumerate(found)
        ]
    )
    tree.by_object = {id(module): index for index, (_, module, _) in enumerate(found)}
    calls: Dict[int, int] = {}
    active: List[int] = []

    def on_call(original: Any, module: Any, index: int, args: tuple, kwargs: dict) -> Any:
        if active and active[-1] == index:
            return original(module, *args, **kwargs)
        call = calls.get(index, 0)
        calls[index] = call + 1
        active.append(index)
        try:
            with jax.named_scope(f"tlm{index}c{call}"):
                return original(module, *args, **kwargs)
        finally:
            active.pop()

    install_module_calls(patches, tree, on_call)


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
    modules = walk(model, framework) if attribute else [("self", model, False)]
    root.modules = modules
    addresses = [address for address, _, _ in modules]
    if framework == "flax_nnx":
        root.params = [(_strip_value(name), value) for name, value in root.params]
    root.trainable = trainable

    def param_module(name: str) -> int:
        best, best_length = 0, -1
        for index, address in enumerate(addresses):
            if address == "self":
                continue
            if (name == address or name.startswith(address + ".")) and len(address) > best_length:
                best, best_length = index, len(address)
        return best

    reachable = _nnx_paths(model) if framework == "flax_nnx" and attribute else {}

    def declare_modules(session: Any) -> None:
        for index, (address, module, container) in enumerate(modules):
            if address == "self":
                continue
            aliases = [other for other in reachable.get(id(module), []) if other != address]
            session.module(index, [address, *aliases], type(module).__name__, container, False)

    def param_trainable(name: str) -> bool:
        return True if trainable is None else trainable.get(name, True)

    root.param_module = param_module
    root.declare_modules = declare_modules
    root.param_trainable = param_trainable
    root.scopes = Scopes if attribute else None
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
