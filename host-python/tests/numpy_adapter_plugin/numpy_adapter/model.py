"""What a model looks like to the NumPy adapter: modules are objects whose array attributes are
parameters and whose module attributes are submodules; calling one runs ``forward``."""

from __future__ import annotations

from typing import Any, Iterator, Tuple

import numpy


class Module:
    """A NumPy module: ``__call__`` runs ``forward``."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def named_parameters(self) -> Iterator[Tuple[str, numpy.ndarray]]:
        """The module's own array attributes."""
        for name, value in vars(self).items():
            if isinstance(value, numpy.ndarray):
                yield name, value

    def named_modules(self) -> Iterator[Tuple[str, Module]]:
        """Every module reachable from this one, root first (the root's address is ``self``)."""
        yield "self", self
        yield from _children(self, "")


def _children(module: Module, prefix: str) -> Iterator[Tuple[str, Module]]:
    for name, value in vars(module).items():
        if isinstance(value, Module):
            yield prefix + name, value
            yield from _children(value, prefix + name + ".")
