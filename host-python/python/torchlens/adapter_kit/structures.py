"""Finding a framework's arrays inside the structures a model takes and returns (nested tuples,
lists and dicts), each with the path that names it in the trace (``output.0.logits``,
``inputs.1``)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple


def named_arrays(value: Any, array_type: Any, prefix: str = "output") -> List[Tuple[str, Any]]:
    """``(path, array)`` for every ``array_type`` instance in ``value``, depth first, in order."""
    found: List[Tuple[str, Any]] = []
    _collect(value, array_type, prefix, found)
    return found


def arrays_in(value: Any, array_type: Any) -> List[Any]:
    """Every ``array_type`` instance in ``value``, depth first, in order (no paths)."""
    return [array for _, array in named_arrays(value, array_type, "")]


def named_inputs(args: tuple, kwargs: dict, array_type: Any) -> List[Tuple[str, Any]]:
    """``(path, array)`` for every array among a call's arguments (``inputs.0``, ``inputs.mask``)."""
    found: List[Tuple[str, Any]] = []
    for index, value in enumerate(args):
        _collect(value, array_type, f"inputs.{index}", found)
    for key, value in kwargs.items():
        _collect(value, array_type, f"inputs.{key}", found)
    return found


def _collect(value: Any, array_type: Any, path: str, found: List[Tuple[str, Any]]) -> None:
    if isinstance(value, array_type):
        found.append((path, value))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            _collect(item, array_type, f"{path}.{index}", found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect(item, array_type, f"{path}.{key}", found)


def shallow_items(value: Any) -> Iterable[Any]:
    """One level of a container: the items of a list or tuple, the values of a dict, else the
    value itself (where a capture looks for arrays held beside a model, without walking
    arbitrary, possibly cyclic, structures)."""
    if isinstance(value, dict):
        return value.values()
    return value if isinstance(value, (list, tuple)) else (value,)


def substitute(structure: Any, replaced: Dict[int, Any]) -> Any:
    """``structure`` with every object whose ``id`` is a key of ``replaced`` swapped for its
    value (a live edit's replacement), tuples, lists and dicts rebuilt, named tuples and
    struct sequences (named tuples of results) kept as their own type."""
    found = replaced.get(id(structure))
    if found is not None:
        return found
    if isinstance(structure, dict):
        return type(structure)((key, substitute(item, replaced)) for key, item in structure.items())
    if isinstance(structure, (tuple, list)):
        items = [substitute(item, replaced) for item in structure]
        if (
            isinstance(structure, tuple)
            and hasattr(structure, "_fields")
            and not hasattr(structure, "n_sequence_fields")
        ):
            return type(structure)(*items)  # a named tuple takes its fields as arguments
        return type(structure)(items)
    return structure
