"""Module attribution of a traced program through named scopes.

While the root is traced into a program, each module call of the root's tree runs inside a
named scope naming the module and its call number (:func:`scoped_module_calls`); the framework
keeps the scopes open around an equation in the equation's scope stack. When the program is
walked, :class:`ModuleScopes` turns changes of that stack between consecutive top-level
equations into module enter and exit events, the outputs of a call being the values made inside
it that are read after it."""

from __future__ import annotations

import re
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Sequence, Tuple

from .module_walk import ModuleRecord, ModuleTree, install_module_calls
from .program_walk import ProgramWalk
from .session import CaptureSession

_SCOPE = re.compile(r"^tlm(\d+)c(\d+)$")


def scope_name(module_id: int, call: int) -> str:
    """The name of the scope of call ``call`` of module ``module_id``."""
    return f"tlm{module_id}c{call}"


def scoped_module_calls(
    patches: Any, modules: Sequence[Tuple[str, Any, bool]], open_scope: Callable[[str], ContextManager]
) -> None:
    """Runs the ``__call__`` of every module of ``modules`` (``(address, module, container)``,
    the root first; the kit's :func:`install_module_calls`) inside
    ``open_scope(scope_name(module id, call))``, the module found by identity; ``patches``
    restores the classes, also when tracing raises. A module that calls itself again through a
    base class's ``__call__`` is one call."""
    tree = ModuleTree(
        [
            ModuleRecord(index, [address], "", container, module)
            for index, (address, module, container) in enumerate(modules)
        ]
    )
    tree.by_object = {id(module): index for index, (_, module, _) in enumerate(modules)}
    calls: Dict[int, int] = {}
    active: List[int] = []

    def on_call(original: Any, module: Any, index: int, args: tuple, kwargs: dict) -> Any:
        if active and active[-1] == index:
            return original(module, *args, **kwargs)
        call = calls.get(index, 0)
        calls[index] = call + 1
        active.append(index)
        try:
            with open_scope(scope_name(index, call)):
                return original(module, *args, **kwargs)
        finally:
            active.pop()

    install_module_calls(patches, tree, on_call)


class ModuleScopes:
    """Turns the module scopes in top-level equations' scope stacks into enter/exit events.
    ``names(equation)`` gives the names of the scopes open around an equation, outermost first
    (other names among them are ignored); ``walk`` reads the program."""

    def __init__(
        self, session: CaptureSession, walk: ProgramWalk, names: Callable[[Any], Iterable[str]]
    ) -> None:
        self.session = session
        self.walk = walk
        self.names = names
        #: (module id, call, index of its first equation) of each open call, outermost first.
        self.open: List[Tuple[int, int, int]] = []
        self.equations: List[Any] = []
        self.last_use: Dict[Any, int] = {}

    def start(self, body: Any) -> None:
        """Reads where each variable of the top level is used last (the outputs of a call
        are its values read after it)."""
        walk = self.walk
        _, _, outvars, equations = walk.parts(body)
        self.equations = list(equations)
        for index, equation in enumerate(self.equations):
            for atom in walk.equation_vars(equation)[0]:
                if walk.literal(atom) is None:
                    self.last_use[atom] = index
        for atom in outvars:
            if walk.literal(atom) is None:
                self.last_use[atom] = len(self.equations)

    def before(self, equation: Any, index: int, env: dict) -> None:
        """Closes the calls ``equation`` is not in and opens the ones it enters."""
        wanted = []
        for name in self.names(equation):
            match = _SCOPE.match(name)
            if match and match.group(1) != "0":  # the root's own call is already open
                wanted.append((int(match.group(1)), int(match.group(2))))
        keep = 0
        while keep < len(self.open) and keep < len(wanted) and self.open[keep][:2] == wanted[keep]:
            keep += 1
        self._close(keep, index, env)
        for module, call in wanted[keep:]:
            self.session.enter(module)
            self.open.append((module, call, index))

    def _close(self, keep: int, index: int, env: dict) -> None:
        while len(self.open) > keep:
            module, _, first = self.open.pop()
            outputs = []
            for equation in self.equations[first:index]:
                for var in self.walk.equation_vars(equation)[1]:
                    if self.last_use.get(var, -1) >= index and var in env and env[var][1] is not None:
                        outputs.append(env[var][1])
            self.session.exit(module, outputs)

    def close(self, env: dict) -> None:
        """Closes every call still open after the last equation."""
        self._close(0, len(self.equations), env)
