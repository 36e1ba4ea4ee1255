"""The door's checks of public arguments: each names the argument, what was given and what is
accepted, as an :class:`~torchlens.errors.ArgumentError` (also a ``TypeError`` and a
``ValueError``), before anything runs or is opened."""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from typing import Any, Optional, Tuple, Type, Union

from .errors import ArgumentError


def short_repr(value: Any) -> str:
    """``repr(value)``, cut to one readable line for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _invalid(argument: str, accepted: str, value: Any, remedy: str) -> ArgumentError:
    return ArgumentError(
        f"{argument} must be {accepted}, got {type(value).__name__} {short_repr(value)}",
        "argument_invalid",
        remedy,
    )


def path_argument(value: Any, argument: str, example: str) -> str:
    """``value`` as a path string, or an ``argument_invalid`` error naming ``argument``. Only
    text and ``os.PathLike`` are paths: an int would be taken by ``open`` as a file descriptor
    (``True`` is descriptor 1, standard output, which closing the file would close)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str) and path:
            return path
    raise _invalid(argument, "a path (a str or os.PathLike)", value, f"pass a path such as {example!r}")


def keyword_inputs(value: Any, argument: str = "kwargs") -> dict:
    """The model's keyword inputs: None or a mapping from names to values."""
    if value is None:
        return {}
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return dict(value)
    raise _invalid(
        argument,
        "a mapping of keyword inputs (dict of name -> value) or None",
        value,
        "pass keyword inputs as a dict, third: tl.trace(model, (x,), {'mask': mask}); positional inputs "
        "go second, as one value or a tuple",
    )


def instance_of(
    value: Any, kinds: Union[Type, Tuple[Type, ...]], argument: str, accepted: str, remedy: str
) -> Any:
    """``value`` when it is one of ``kinds`` (``bool`` is not taken for an int); else the error."""
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        return value
    raise _invalid(argument, accepted, value, remedy)


def optional_instance_of(
    value: Any, kinds: Union[Type, Tuple[Type, ...]], argument: str, accepted: str, remedy: str
) -> Optional[Any]:
    """Like :func:`instance_of`, with None allowed."""
    return None if value is None else instance_of(value, kinds, argument, accepted + " or None", remedy)


def flag(value: Any, argument: str) -> bool:
    """A True/False argument (0 and 1 are refused: a typo for another argument, usually)."""
    return instance_of(value, bool, argument, "True or False", f"pass {argument}=True or {argument}=False")


def backend_name(value: Any) -> Optional[str]:
    """A backend name, or None (route the model to its framework)."""
    return optional_instance_of(
        value,
        str,
        "backend",
        "a backend name ('torch', 'jax', 'tf', 'mlx', 'paddle', 'tinygrad')",
        "pass backend='torch' (or another name tl.backends lists), or None to route by the model",
    )


def real_number(value: Any, argument: str, example: str, optional: bool = False) -> Any:
    """A finite-or-infinite real number (an int, a float, a NumPy scalar; not a bool), or None
    when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and not _is_nan(value):
        return value
    accepted = "a real number (not NaN)" + (" or None" if optional else "")
    raise _invalid(argument, accepted, value, f"pass a number, e.g. {example}")


def _is_nan(value: Any) -> bool:
    return value != value


def model_argument(model: Any) -> Any:
    """The model to run, refused when it is a class (``tl.trace(nn.Linear, x)`` would call the
    constructor with the input). Anything else goes to routing, whose ``backend_undetected``
    names the frameworks it knows."""
    if isinstance(model, type):
        raise ArgumentError(
            f"model is the class {model.__name__}, not a model: tracing it would call its constructor "
            "with the inputs",
            "model_is_a_class",
            f"build the model first, e.g. tl.trace({model.__name__}(...), x)",
        )
    return model


def _as_tuple(kinds: Union[Type, Tuple[Type, ...]]) -> Tuple[Type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)
