"""The names a trace gives a call's positional inputs: the parameter names of the traced
function (``x``, ``tokens``), ``args.<n>`` past them or for ``*args``. Reading a signature costs
tens of microseconds, a visible part of a small model's trace, so the parameters are read once
per function (a bound method's function, so every call of ``model.forward`` shares them)."""

from __future__ import annotations

import inspect
import weakref
from typing import Any, List, MutableMapping, Optional, Tuple

#: Function → its parameters (None when it has no readable signature), by bound-ness.
_PARAMETERS: MutableMapping[Any, Tuple[Optional[list], Optional[list]]] = weakref.WeakKeyDictionary()


def _parameters(function: Any) -> List[inspect.Parameter]:
    underlying = getattr(function, "__func__", None)
    bound = underlying is not None
    key = underlying if bound else function
    try:
        cached = _PARAMETERS.get(key)
    except TypeError:  # not weakly referenceable or not hashable: read it every time
        cached, key = None, None
    if cached is not None and cached[bound] is not None:
        return cached[bound]
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    if key is not None:
        entry = list(cached) if cached is not None else [None, None]
        entry[bound] = parameters
        try:
            _PARAMETERS[key] = (entry[0], entry[1])
        except TypeError:
            pass
    return parameters


def argument_names(function: Any, count: int, skip: int = 0) -> List[str]:
    """Names of the first ``count`` positional inputs of ``function`` (its first ``skip``
    parameters are not inputs)."""
    parameters = _parameters(function)[skip:]
    names = []
    for index in range(count):
        parameter = parameters[index] if index < len(parameters) else None
        if parameter is None or parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            names.append(f"args.{index}")
        else:
            names.append(parameter.name)
    return names
