"""One module walker for the adapters whose frameworks keep modules as an object tree (Keras
layers and ``tf.Module``, ``paddle.nn.Layer``): every module once, with all its addresses, and
the values each owns. The framework supplies only how to list a module's children and its own
values."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Tuple

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
        self, session: Any, is_container: Callable[[Any], bool], training: Callable[[Any], bool]
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
