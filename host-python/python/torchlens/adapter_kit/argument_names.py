"""The names a trace gives a call's positional inputs: the parameter names of the traced
function (``x``, ``tokens``), ``args.<n>`` past them or for ``*args``. Reading a signature costs
tens of microseconds, a visible part of a small model's trace, so the parameters are read once
per function (a bound method's function, so every call of ``model.forward`` shares them) and read
again only when the function's code or defaults were replaced; an entry goes with its function."""

from __future__ import annotations

import inspect
import types
import weakref
from typing import Any, List, MutableMapping, Tuple

#: Function → (its code, its defaults, whether read through a bound method, its parameters).
_PARAMETERS: MutableMapping[Any, Tuple[Any, Any, bool, List[inspect.Parameter]]] = weakref.WeakKeyDictionary()


def _parameters(function: Any) -> List[inspect.Parameter]:
    underlying = getattr(function, "__func__", function)
    bound = underlying is not function
    cacheable = isinstance(underlying, types.FunctionType)
    if cacheable:
        known = _PARAMETERS.get(underlying)
        if (
            known is not None
            and known[0] is underlying.__code__
            and known[1] is underlying.__defaults__
            and known[2] == bound
        ):
            return known[3]
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    if cacheable:
        _PARAMETERS[underlying] = (underlying.__code__, underlying.__defaults__, bound, parameters)
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
