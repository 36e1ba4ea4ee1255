"""An op's parameters as the text attributes the trace records: scalars, names, NumPy dtypes and
short tuples of them render; anything else (arrays, nested programs, callables) is left out."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy

#: Rendered parameters, by (name, value): the same parameters recur across ops and captures.
#: Bounded; unhashable values are rendered each time.
_RENDERED: Dict[Tuple[str, Any], Optional[str]] = {}
_CAPACITY = 65536


def attribute_text(key: str, value: Any) -> Optional[str]:
    """The text of parameter ``key``'s ``value``, or None when it does not render."""
    try:
        return _RENDERED[(key, value)]
    except KeyError:
        text = _render(value)
        if len(_RENDERED) < _CAPACITY:
            _RENDERED[(key, value)] = text
        return text
    except TypeError:
        return _render(value)


def rendered_attributes(params: Iterable[Tuple[str, Any]]) -> List[Tuple[str, str]]:
    """``(key, text)`` of every parameter that renders, in order."""
    attributes = []
    for key, value in params:
        text = attribute_text(key, value)
        if text is not None:
            attributes.append((key, text))
    return attributes


def _render(value: Any) -> Optional[str]:
    if value is None or isinstance(value, (bool, int, float, str, numpy.dtype, numpy.generic)):
        return str(value)
    if isinstance(value, tuple) and len(value) <= 16:
        parts = [_render(item) for item in value]
        texts = [part for part in parts if part is not None]
        if len(texts) == len(parts):
            return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"
    return None
