"""Where a framework's loaded modules hold given functions: for a framework that generates one
Python function per op type and copies it into other modules (``from generated import *``), so
replacing it for a capture means replacing every copy.

A site is ``(module, attribute, tag)``: an attribute holding one of the functions (its tag names
the op type it runs). The scan reads every loaded module under the framework's package and is
kept until more modules are loaded."""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Tuple

Site = Tuple[Any, str, str]


class FunctionSites:
    """The sites of the functions the modules under ``package`` define. ``defines(module)``
    says whether a module defines them, ``names()`` maps each function's name there to its tag,
    and ``by_tag(module)`` says whether a module also holds them under their tags as names (a
    module of functions named after their op types)."""

    def __init__(
        self,
        package: str,
        defines: Callable[[Any], bool],
        names: Callable[[], Dict[str, str]],
        by_tag: Callable[[Any], bool],
    ) -> None:
        self.package = package
        self.defines = defines
        self.names = names
        self.by_tag = by_tag
        #: How many modules were loaded at the last scan, and its sites.
        self._loaded = -1
        self._sites: List[Site] = []

    def sites(self) -> List[Site]:
        """Every site, rescanned when modules were loaded since the last scan."""
        if self._loaded == len(sys.modules):
            return self._sites
        names = self.names()
        tags = set(names.values())
        prefix = self.package + "."
        modules = [module for name, module in list(sys.modules.items()) if name.startswith(prefix)]
        functions: Dict[int, str] = {}
        for module in modules:
            if module is not None and self.defines(module):
                for name, tag in names.items():
                    function = vars(module).get(name)
                    if callable(function):
                        functions[id(function)] = tag
        found = []
        for module in modules:
            try:
                attributes = vars(module)
            except TypeError:
                continue
            named = self.by_tag(module)
            for name, value in list(attributes.items()):
                tag = functions.get(id(value))
                if tag is None and named and callable(value) and name in tags:
                    tag = name
                if tag is not None:
                    found.append((module, name, tag))
        self._loaded, self._sites = len(sys.modules), found
        return found
