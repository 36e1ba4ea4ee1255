"""Holds docs/errors.md to the error codes the code base can raise.

The codes are found in the source, where they are written as string literals (the set is
closed: a code is never built at run time):

* Python (the package under host-python/python/torchlens and the plugins under backends/):
  every call that passes ``(message, code, remedy)`` — an exception class of
  ``torchlens.errors`` or a ``refuse`` helper — with the code as a literal second argument, or
  ``code="..."``.
* Rust (core-wasm, host-runtime, host-cli): ``CoreError::new(family, "code", ...)``,
  ``CliError::new(exit, "code", ...)``, a helper whose first parameter is
  ``code: &'static str`` called with a literal (``reason("code", ...)`` makes the validation
  reasons, which a user meets in ``ValidationStatus.reason``), ``code: "..."`` in a struct
  literal, a literal a ``match`` arm or a ``return`` picks, a ``(code, message)`` pair a check
  returns (``Err(("code", ...))``), and the refusal table (``refusal("code", ...)``).

Every code
found must have a row in docs/errors.md (a table row whose first cell is the code in
backticks), and every row must name a code that is found. ``--missing`` prints a draft row,
with the remedy found beside the code, for each code the page lacks.

Standard library only; run from anywhere: ``python scripts/checks/error_codes.py``.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from typing import Dict, Iterator, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "errors.md")
PYTHON_FOLDERS = ("host-python/python/torchlens", "backends")
RUST_FOLDERS = ("core-wasm/src", "host-runtime/src", "host-cli/src")

CODE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
ROW = re.compile(r"^\|\s*`([a-z0-9_]+)`\s*\|")
RUST_LITERAL = r'"([a-z][a-z0-9]*(?:_[a-z0-9]+)+)"'
RUST_CALLS = (
    re.compile(r"CoreError::new\(\s*[\w:]+\s*,\s*" + RUST_LITERAL),
    re.compile(r"CliError::new\(\s*[\w:]+\s*,\s*" + RUST_LITERAL),
    re.compile(r"\bcode:\s*" + RUST_LITERAL),
    re.compile(r"\brefusal\(\s*" + RUST_LITERAL),
    # A code chosen by a match (the host's trap codes): `Some(Trap::OutOfFuel) => "code"`.
    re.compile(r"(?:=>|\breturn)\s*" + RUST_LITERAL),
    # A (code, message) pair a check returns for its caller to wrap: `Err(("code", ...))`.
    re.compile(r"Err\(\(\s*" + RUST_LITERAL),
)
RUST_HELPER = re.compile(r"fn\s+(\w+)\s*\(\s*code:\s*&'static\s+str")
# Strings a `code: "..."` field may hold that are not error codes (none today).
NOT_CODES: frozenset = frozenset()


def _files(folders: Tuple[str, ...], suffix: str) -> Iterator[str]:
    for folder in folders:
        for base, subfolders, files in os.walk(os.path.join(ROOT, folder)):
            subfolders[:] = sorted(name for name in subfolders if name not in ("tests", "__pycache__"))
            for name in sorted(files):
                if name.endswith(suffix):
                    yield os.path.join(base, name)


def _callee(node: ast.Call) -> str:
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _literal(node: ast.AST) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def python_codes() -> Dict[str, Tuple[str, str]]:
    """Code -> (file, remedy) for every code the Python side raises."""
    found: Dict[str, Tuple[str, str]] = {}
    for path in _files(PYTHON_FOLDERS, ".py"):
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node)
            code, remedy = "", ""
            keywords = {keyword.arg: keyword.value for keyword in node.keywords}
            if "code" in keywords:
                code = _literal(keywords["code"])
            elif (name.endswith("Error") or name.lstrip("_") == "refuse") and len(node.args) >= 2:
                code = _literal(node.args[1])
                remedy = _literal(node.args[2]) if len(node.args) >= 3 else ""
            if code and CODE.match(code):
                found.setdefault(code, (os.path.relpath(path, ROOT), remedy))
    return found


def rust_codes() -> Dict[str, Tuple[str, str]]:
    """Code -> (file, "") for every code the Rust side returns."""
    sources = {path: open(path, encoding="utf-8").read() for path in _files(RUST_FOLDERS, ".rs")}
    helpers = {match.group(1) for text in sources.values() for match in RUST_HELPER.finditer(text)}
    patterns = list(RUST_CALLS)
    if helpers:
        patterns.append(re.compile(r"\b(?:" + "|".join(sorted(helpers)) + r")\(\s*" + RUST_LITERAL))
    found: Dict[str, Tuple[str, str]] = {}
    for path, text in sources.items():
        text = text.split("#[cfg(test)]")[0]
        for pattern in patterns:
            for match in pattern.finditer(text):
                if match.group(1) not in NOT_CODES:
                    found.setdefault(match.group(1), (os.path.relpath(path, ROOT), ""))
    return found


def documented() -> Dict[str, int]:
    """Code -> line of its row in docs/errors.md."""
    rows: Dict[str, int] = {}
    for number, line in enumerate(open(PAGE, encoding="utf-8"), 1):
        match = ROW.match(line)
        if match:
            rows.setdefault(match.group(1), number)
    return rows


def main() -> int:
    found = {**rust_codes(), **python_codes()}
    rows = documented() if os.path.exists(PAGE) else {}
    missing = sorted(set(found) - set(rows))
    stale = sorted(set(rows) - set(found))
    if "--missing" in sys.argv:
        for code in missing:
            where, remedy = found[code]
            print(f"| `{code}` | {where} | {remedy} |")
        return 0
    for code in missing:
        print(f"docs/errors.md: no row for `{code}` (raised in {found[code][0]})")
    for code in stale:
        print(f"docs/errors.md:{rows[code]}: `{code}` is not raised anywhere")
    if missing or stale:
        print("error codes: FAILED (python scripts/checks/error_codes.py --missing drafts the rows)")
        return 1
    print(f"error codes: ok ({len(found)} codes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
