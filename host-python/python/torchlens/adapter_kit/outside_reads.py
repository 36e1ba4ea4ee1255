"""What a forward can read from outside itself, found without running it: the values in the
globals its code reads, in its closures and defaults, and in the attributes of the objects it
runs on. A backend whose arrays are plain Python objects tells with it a constant the forward
read (an array that existed before) from an array it built with a call no wrapper saw, and
finds the framework-transformed functions it will call (to route each through one op)."""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Iterable, List, Optional, Set, Tuple

#: ``(owner, name, value)``: the owner is the module of a global or the object of an instance
#: attribute (where the value can be replaced for a capture), None for the other places.
Read = Tuple[Optional[Any], str, Any]


def code_reads(objects: Iterable[Any], framework: str) -> List[Read]:
    """Every value the code of ``objects`` can read from outside: for a function, the globals
    its code (and the code nested in it) names, its closure cells and defaults; for a callable
    object, the same of its class's ``__call__``, its instance attributes, and the class
    attributes of its classes outside the ``framework`` package and builtins."""
    found: List[Read] = []
    seen: Set[int] = set()
    for obj in objects:
        function = obj if callable(obj) and hasattr(obj, "__code__") else None
        if function is None:
            function = type(obj).__call__ if callable(obj) else None
            found.extend((obj, name, value) for name, value in _attributes(obj))
            for klass in inspect.getmro(type(obj)):
                if klass.__module__.split(".", 1)[0] not in (framework, "builtins"):
                    found.extend((None, name, value) for name, value in vars(klass).items())
        function = getattr(function, "__func__", function)
        if function is None or id(function) in seen:
            continue
        seen.add(id(function))
        code = getattr(function, "__code__", None)
        namespace = getattr(function, "__globals__", None) or {}
        if code is not None:
            module = sys.modules.get(getattr(function, "__module__", None) or "")
            owner = module if module is not None and vars(module) is namespace else None
            found.extend((owner, name, namespace[name]) for name in _names(code) if name in namespace)
        for cell in getattr(function, "__closure__", None) or ():
            try:
                found.append((None, "", cell.cell_contents))
            except ValueError:  # an empty cell
                continue
        found.append((None, "", getattr(function, "__defaults__", None) or ()))
    return found


def _names(code: types.CodeType) -> Set[str]:
    """Global names a code object (and the code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _attributes(obj: Any) -> List[Tuple[str, Any]]:
    try:
        return list(vars(obj).items())
    except TypeError:  # no instance dictionary
        return []
