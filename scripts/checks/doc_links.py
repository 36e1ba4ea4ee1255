"""Fails when README.md or a page under docs/ points outside the repository or at a missing file.

Checked, outside fenced code blocks:

* every Markdown link and image (``[text](target)``, ``![alt](target)``) and reference
  definition (``[id]: target``): the target, less its ``#anchor`` and ``?query``, is resolved
  against the page's folder (a leading ``/`` against the repository root). It must stay inside
  the repository and name a file or folder that exists. ``http(s)://``, ``mailto:`` and
  anchor-only (``#section``) targets are not checked.
* every path reference in the text (in backticks or not) that starts with one of the
  repository's top-level folders (``docs/``, ``host-python/``, ``scripts/`` ...): such paths are
  written from the repository root, and the file or folder must exist. A path stops at the
  first character that cannot be part of one, so ``backends/<name>/`` checks ``backends/``.
  Links are left out of this scan (their text and target are relative to the page, and the
  target is checked as a link).

Anywhere in a page, fenced blocks included, ``../shared`` is refused: those files are not in the
repository. Every page under docs/ must be reachable by links from docs/index.md, the entry
point README.md sends newcomers to.

Standard library only; run from anywhere: ``python scripts/checks/doc_links.py``.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Iterator, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Folders that builds and setup create at the top level; paths under them are not in the tree.
GENERATED = {".git", ".venv", ".venv-reference", ".venv-pins", "target", "out", "dist", "node_modules"}

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def pages(root: str = ROOT) -> List[str]:
    """README.md and every Markdown file under docs/, as paths relative to ``root``."""
    found = ["README.md"] if os.path.isfile(os.path.join(root, "README.md")) else []
    for folder, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".md"):
                found.append(os.path.relpath(os.path.join(folder, name), root))
    return found


def top_level_folders(root: str = ROOT) -> List[str]:
    return sorted(
        name
        for name in os.listdir(root)
        if os.path.isdir(os.path.join(root, name)) and name not in GENERATED and not name.startswith(".")
    )


def prose_lines(text: str) -> Iterator[Tuple[int, str]]:
    """(line number, line) for each line outside fenced code blocks."""
    fence: Optional[str] = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def link_problem(page: str, target: str, root: str = ROOT) -> Optional[str]:
    """Why a link target of ``page`` is wrong, or None when it is fine or not checked."""
    if not target or target.startswith("#") or EXTERNAL.match(target):
        return None
    path = re.split(r"[#?]", target, maxsplit=1)[0]
    if not path:
        return None
    if path.startswith("/"):
        resolved = os.path.normpath(os.path.join(root, path.lstrip("/")))
    else:
        resolved = os.path.normpath(os.path.join(root, os.path.dirname(page), path))
    if "../shared" in target or os.path.relpath(resolved, root).startswith(".."):
        return f"link {target!r} leaves the repository"
    if not os.path.exists(resolved):
        return f"link {target!r} names a missing file ({os.path.relpath(resolved, root)})"
    return None


def linked_pages(page: str, text: str, root: str = ROOT) -> List[str]:
    """The Markdown pages (relative to ``root``) that ``page``'s links name and that exist."""
    found = []
    for _, line in prose_lines(text):
        for match in INLINE_LINK.finditer(line):
            target = re.split(r"[#?]", match.group(1), maxsplit=1)[0]
            if not target or EXTERNAL.match(target) or not target.endswith(".md"):
                continue
            resolved = os.path.normpath(os.path.join(root, os.path.dirname(page), target))
            if os.path.isfile(resolved):
                found.append(os.path.relpath(resolved, root))
    return found


def unreachable_pages(root: str = ROOT) -> List[str]:
    """Pages under docs/ that no chain of links from docs/index.md reaches."""
    index = os.path.join("docs", "index.md")
    if not os.path.isfile(os.path.join(root, index)):
        return [index]
    seen = {index}
    todo = [index]
    while todo:
        page = todo.pop()
        with open(os.path.join(root, page), encoding="utf-8") as handle:
            text = handle.read()
        for linked in linked_pages(page, text, root):
            if linked.startswith("docs" + os.sep) and linked not in seen:
                seen.add(linked)
                todo.append(linked)
    return [page for page in pages(root) if page.startswith("docs" + os.sep) and page not in seen]


def problems(root: str = ROOT) -> List[str]:
    """Every problem found, as ``path:line: message``."""
    folders = top_level_folders(root)
    path_reference = re.compile(
        r"(?<![\w./-])((?:" + "|".join(re.escape(name) for name in folders) + r")/[\w./-]*)"
    )
    found: List[str] = []
    for page in pages(root):
        with open(os.path.join(root, page), encoding="utf-8") as handle:
            text = handle.read()
        for number, line in enumerate(text.splitlines(), start=1):
            if "../shared" in line:
                found.append(f"{page}:{number}: '../shared' is outside the repository")
        for number, line in prose_lines(text):
            targets = [match.group(1) for match in INLINE_LINK.finditer(line)]
            definition = REFERENCE_DEFINITION.match(line)
            if definition:
                targets.append(definition.group(1))
            for target in targets:
                problem = link_problem(page, target, root)
                if problem:
                    found.append(f"{page}:{number}: {problem}")
            scanned = "" if definition else INLINE_LINK.sub(" ", line)
            for match in path_reference.finditer(scanned):
                path = match.group(1).rstrip(".,;:")
                if not os.path.exists(os.path.join(root, path)):
                    found.append(f"{page}:{number}: path {path!r} does not exist")
    for page in unreachable_pages(root):
        found.append(f"{page}: not reachable by links from docs/index.md")
    return found


def main() -> int:
    found = problems()
    for problem in found:
        print(problem)
    if found:
        print(f"doc links: {len(found)} problem(s) in README.md and docs/", file=sys.stderr)
        return 1
    print(f"doc links: ok ({len(pages())} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
