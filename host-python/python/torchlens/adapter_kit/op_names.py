"""One name normaliser for every backend: a framework's CamelCase op type as the snake_case
function name a trace records (``Conv2DBackpropInput`` → ``conv2d_backprop_input``)."""

from __future__ import annotations

import functools


# Called for every recorded op: a framework has a few hundred op types, so each is worked out once.
@functools.lru_cache(maxsize=4096)
def snake_case(name: str) -> str:
    """``name`` in snake case, the way a graph framework names an op type's generated Python function:
    an underscore goes before a capital that follows a lower-case letter, or that starts a
    lower-case word (``BiasAdd`` → ``bias_add``, ``AddV2`` → ``add_v2``, ``HSVToRGB`` →
    ``hsv_to_rgb``); a capital after a digit stays in its word (``Conv2D`` → ``conv2d``, where
    a plain regex gives ``conv2_d``)."""
    pieces = []
    last = len(name) - 1
    for index, char in enumerate(name):
        if char.isupper() and index > 0 and name[index - 1] != "_":
            previous = name[index - 1]
            starts_word = index < last and name[index + 1].islower()
            if previous.islower() or starts_word:
                pieces.append("_")
        pieces.append(char.lower())
    return "".join(pieces)
