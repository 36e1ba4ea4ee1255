"""Strings from a file, made safe to print on a terminal. A ``.tlspec`` from anyone carries
names (modules, op labels, manifest fields) that reprs and messages show; raw, an escape
sequence among them could retitle the window, clear the screen or plant a hyperlink, and a
bidirectional override could make one name read as another.

:func:`shown` is the core's escaping function (``escape-terminal-text``, the same code the
summary table and the ``tlspec`` CLI use): control characters (C0, DEL, C1) and bidirectional
overrides become visible escapes (``\\x1b``, ``\\u{202e}``). Data (``op.label``, ``trace.ops``,
JSON) keeps the strings exact; only text meant for a person goes through it."""

from __future__ import annotations

import re

from ._core import core

# The characters the core escapes (schema/src/terminal_text.rs ``is_terminal_control``): text
# without any needs no call into the core.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` as it may be shown on a terminal (the core's escaping; plain text unchanged)."""
    text = str(text)
    if _CONTROL.search(text) is None:
        return text
    return core().escape_terminal_text(text)
