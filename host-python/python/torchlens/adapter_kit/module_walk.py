"""Module discovery, written once for every adapter whose framework keeps modules as objects:

* :class:`ModuleWalk`, for frameworks whose modules list their children (a layer class with a
  ``sublayers``/``submodules`` method): every module once, with all its addresses, and the values
  each owns;
* :func:`discover_tree`, for frameworks whose modules are found by walking object attributes
  (a module class that is a dict of its children, callable objects holding arrays): modules, container modules
  for the lists and dicts that hold them, and parameters.

The framework supplies only predicates and child listings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

if TYPE_CHECKING:  # only named in a signature
    from .session import CaptureSession

#: ``children(module)`` → ``(attribute name, child module)`` pairs, in the framework's order.
Children = Callable[[Any], Iterable[Tuple[str, Any]]]


class ModuleWalk:
    """The module tree under ``root`` (module id 0, address ``self``), depth first in the
    framework's child order. A module reachable under several addresses is one module whose
    first address is primary and whose later ones are aliases."""

    def __init__(self, root: Any, children: Children) -> None:
        #: ``id(module)`` → every address it is reachable under (the first is primary).
        self.addresses: Dict[int, List[str]] = {}
        #: ``(prefix, module)`` in declaration order; the prefix of the root is ``""``.
        self.modules: List[Tuple[str, Any]] = []
        #: ``id(module)`` → its module id (its position in :attr:`modules`).
        self.module_ids: Dict[int, int] = {}
        self._visit("", root, children)

    def _visit(self, prefix: str, module: Any, children: Children) -> None:
        known = self.addresses.get(id(module))
        if known is not None:
            known.append(prefix or "self")
            return
        self.addresses[id(module)] = [prefix or "self"]
        self.module_ids[id(module)] = len(self.modules)
        self.modules.append((prefix, module))
        dotted = f"{prefix}." if prefix else ""
        for name, child in children(module):
            if child is not None:
                self._visit(dotted + name, child, children)

    def primary_address(self, module_id: int) -> str:
        """The first address of the module with this id."""
        return self.addresses[id(self.modules[module_id][1])][0]

    def declare(
        self, session: CaptureSession, is_container: Callable[[Any], bool], training: Callable[[Any], bool]
    ) -> None:
        """Reports every module to the capture session (shared ones once, with all addresses)."""
        for module_id, (_prefix, module) in enumerate(self.modules):
            session.module(
                module_id,
                self.addresses[id(module)],
                type(module).__name__,
                is_container(module),
                training(module),
            )

    def owned(self, own: Callable[[Any], Iterable[Tuple[str, Any]]]) -> Iterator[Tuple[str, int, Any]]:
        """``(address, module id, value)`` for every value a module owns (``own(module)`` gives
        ``(name, value)`` pairs), each value once, under its first owner."""
        seen = set()
        for module_id, (prefix, module) in enumerate(self.modules):
            dotted = f"{prefix}." if prefix else ""
            for name, value in own(module):
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield dotted + name, module_id, value


# ---- module trees found by walking object attributes ------------------------------------------


@dataclass
class ModuleRecord:
    """One module of a :class:`ModuleTree`: its id, its addresses (primary first), its class
    name, whether it is a container (a list, tuple or dict holding modules) and the object."""

    module_id: int
    addresses: List[str]
    class_name: str
    container: bool
    obj: Any


@dataclass
class ModuleTree:
    """Modules (the root is id 0, ``self``), parameters ``(address, owning module id, array,
    trainable)`` and ``id(object)`` → module id."""

    modules: List[ModuleRecord] = field(default_factory=list)
    params: List[Tuple[str, int, Any, bool]] = field(default_factory=list)
    by_object: Dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ObjectTreeRules:
    """What a framework says about the objects under a root, for :func:`discover_tree`:
    ``is_array`` (a parameter), ``is_module`` (a module to walk), ``children(module)`` (its
    ``(name, value)`` attributes, in order), ``holds_modules(container)`` (a list, tuple or dict
    that gets a container module of its own, as a module list does), ``trainable(array)``
    and how deep to walk."""

    is_array: Callable[[Any], bool]
    is_module: Callable[[Any], bool]
    children: Callable[[Any], Iterable[Tuple[str, Any]]]
    #: None: a container holds modules when a module is among its items, or among the items
    #: of the lists, tuples and dicts it holds (a few levels down).
    holds_modules: Optional[Callable[[Any], bool]] = None
    trainable: Callable[[Any], bool] = lambda array: True
    max_depth: int = 32

    def container_holds_modules(self, value: Any, depth: int = 0) -> bool:
        """Whether a list, tuple or dict gets a container module of its own."""
        if self.holds_modules is not None:
            return self.holds_modules(value)
        if depth > 4:
            return False
        if self.is_module(value):
            return True
        items = (
            value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        )
        return any(self.container_holds_modules(item, depth + 1) for item in items)


def discover_tree(root: Any, rules: ObjectTreeRules) -> ModuleTree:
    """The module tree and parameters under ``root`` (module id 0, address ``self``). A module
    reachable under several addresses is one module (the first address primary, the others
    aliases); an array reachable twice is one parameter, of the module that holds it first."""
    tree = ModuleTree()
    tree.modules.append(ModuleRecord(0, ["self"], type(root).__name__, False, root))
    tree.by_object[id(root)] = 0
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
        if depth > rules.max_depth:
            return
        if rules.is_array(value):
            if id(value) not in seen_arrays:
                seen_arrays.add(id(value))
                tree.params.append((address, owner, value, rules.trainable(value)))
            return
        # A module first: a module class may itself be a dict.
        if rules.is_module(value):
            module_id = add(value, address, False)
            if module_id >= 0:
                walk(value, address, module_id, depth + 1)
            return
        if isinstance(value, (list, tuple, dict)):
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            holder = owner
            if rules.container_holds_modules(value):
                holder = add(value, address, True)
                if holder < 0:
                    return
            for key, item in items:
                visit(item, f"{address}.{key}", holder, depth + 1)

    def walk(module: Any, prefix: str, owner: int, depth: int) -> None:
        for name, value in rules.children(module):
            visit(value, f"{prefix}.{name}" if prefix else name, owner, depth)

    walk(root, "", 0, 0)
    return tree


#: ``on_call(original, module, module id, args, kwargs)``: one call of a module of a tree.
ModuleCall = Callable[[Callable[..., Any], Any, int, tuple, dict], Any]


def call_owners(tree: ModuleTree) -> List[type]:
    """The classes whose ``__call__`` runs the calls of the tree's modules (for each module,
    the first class in its MRO that defines ``__call__``)."""
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


def install_module_calls(patches: Any, tree: ModuleTree, on_call: ModuleCall) -> None:
    """Wraps ``__call__`` of every class that runs the tree's module calls, for the capture
    (owner thread only, restored by ``patches``): a call of a module of the tree other than the
    root runs through ``on_call``; every other call, another instance of the same class
    included, passes straight through."""
    by_object = tree.by_object
    for klass in call_owners(tree):
        original = vars(klass)["__call__"]

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def call(module: Any, *args: Any, **kwargs: Any) -> Any:
                module_id = by_object.get(id(module))
                if not module_id:
                    return original(module, *args, **kwargs)
                return on_call(original, module, module_id, args, kwargs)

            return call

        patches.replace(klass, "__call__", patches.for_owner_thread(make(original), original))


def bracketed_calls(session: Any, known_ids: Callable[[Any], List[int]]) -> ModuleCall:
    """An ``on_call`` for :func:`install_module_calls` that reports each module call to the
    session: ``enter`` before it runs, ``exit`` with ``known_ids(output)`` (the value ids of the
    output's recorded arrays) after. A module that calls itself again through a base class's
    ``__call__`` is one call."""
    open_calls: List[int] = []

    def on_call(original: Callable[..., Any], module: Any, module_id: int, args: tuple, kwargs: dict) -> Any:
        if open_calls and open_calls[-1] == module_id:
            return original(module, *args, **kwargs)
        session.enter(module_id)
        open_calls.append(module_id)
        try:
            output = original(module, *args, **kwargs)
        finally:
            open_calls.pop()
        session.exit(module_id, known_ids(output))
        return output

    return on_call


def attributes_holding(
    node: Any, accept: Callable[[Any], bool], containers: Tuple[type, ...] = (list, tuple, dict)
) -> List[Tuple[str, Any]]:
    """``(name, value)`` of every value ``accept`` takes that a public attribute of ``node``
    holds, itself or as an item of a list, tuple or dict among ``containers`` (named
    ``attribute.<index>`` or ``attribute.<key>``), in attribute order; ``node`` itself is never
    listed. A value under two attributes is listed twice (a :class:`ModuleWalk` records the
    second address as an alias)."""
    found: List[Tuple[str, Any]] = []
    for key, value in vars(node).items():
        if key.startswith("_"):
            continue
        if isinstance(value, (list, tuple)) and isinstance(value, containers):
            items: Iterable[Tuple[Any, Any]] = enumerate(value)
        elif isinstance(value, dict) and dict in containers:
            items = value.items()
        else:
            items = [(None, value)]
        for item_key, item in items:
            if item is not node and accept(item):
                found.append((key if item_key is None else f"{key}.{item_key}", item))
    return found
