"""Fails when `make test`'s two cargo runs would compile wasmtime twice.

`make test` compiles the Rust tests (``cargo test --workspace --exclude torchlens-python``)
and then installs the Python extension in the same dev profile (``cargo rustc -p
torchlens-python`` under maturin). The second run reuses the first one's wasmtime only when
every crate the extension depends on is built with the same features in
both; Cargo resolves features over the packages a run selects, so a feature that only the
tests' dependencies turn on (safetensors turning on hashbrown's, for example) gives wasmtime
another build: minutes of `make test`, and no test would notice.

This compares, package by package, the features ``cargo tree`` reports for the extension's
dependencies (normal and build) with those of the test run: every feature set the extension
builds a package with must be one the tests build it with too (the tests may have more: a
package can be built on both sides of a build, as a normal and as a build dependency, and
``cargo tree`` does not say which set is which side's). It names each package that fails, with
the remedy. Run from anywhere: ``python scripts/checks/shared_wasmtime_build.py``.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Set

REPOSITORY = Path(__file__).resolve().parents[2]

# The two selections of the Makefile (rust-test-build, python-package-dev).
TEST_SELECTION = ["--workspace", "--exclude", "torchlens-python"]
EXTENSION_SELECTION = ["-p", "torchlens-python", "-e", "normal,build"]


def features_by_package(selection: List[str]) -> Dict[str, Set[str]]:
    """Each package of a selection's graph (``name vX.Y.Z``) → the feature sets it is built with."""
    listing = subprocess.run(
        ["cargo", "tree", "--locked", *selection, "--prefix", "none", "-f", "{p}|{f}"],
        cwd=REPOSITORY,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages: Dict[str, Set[str]] = defaultdict(set)
    for line in listing.splitlines():
        if "|" not in line:
            continue
        package, features = line.removesuffix(" (*)").split("|", 1)
        packages[package.split(" (")[0]].add(features)
    return packages


def main() -> int:
    extension = features_by_package(EXTENSION_SELECTION)
    tests = features_by_package(TEST_SELECTION)
    differing = sorted(
        name for name, features in extension.items() if name in tests and not features <= tests[name]
    )
    for name in differing:
        print(
            f"shared_wasmtime_build: {name} is built with features {sorted(extension[name])} for "
            f"the extension and {sorted(tests[name])} for the tests; name the tests' features "
            "for it in host-python/Cargo.toml (or drop them from the tests' dependency) so "
            "make test compiles wasmtime once (docs/decisions.md)",
            file=sys.stderr,
        )
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
