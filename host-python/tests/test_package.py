"""Packaging facts: importing torchlens imports no framework, and the package reports the core
component and wasmtime versions it runs on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# The host's choice and the versions it reports differ by host: make test runs these under each.
pytestmark = pytest.mark.both_hosts


def test_import_torchlens_imports_no_framework():
    frameworks = "('torch', 'jax', 'tensorflow', 'mlx', 'paddle', 'tinygrad', 'numpy', 'ray')"
    code = f"import sys, torchlens; print(sorted(m for m in {frameworks} if m in sys.modules))"
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert output.strip() == "[]"


def test_the_core_answers_from_inside_the_embedded_component():
    """The build id is computed into the component when it is compiled; the running core
    reports it, and the same bytes sit inside the component the extension embeds (and nowhere
    else: the extension does not link the core natively, see the Makefile's lint target)."""
    from torchlens import _native
    from torchlens._core import core

    component = _native.embedded_component()
    assert component[:4] == b"\0asm"
    build_id = core().build_id()
    assert build_id.startswith("torchlens-core-build:") and len(build_id) > len("torchlens-core-build:") + 8
    assert build_id.encode() in component
    # The extension holds the id only inside the embedded component: no native copy of the core
    # (which would carry its own copy of the constant) is linked into it.
    with open(_native.__file__, "rb") as handle:
        extension = handle.read()
    assert extension.count(build_id.encode()) == component.count(build_id.encode())


def test_versions_report_the_component_the_host_and_its_wasmtime():
    import torchlens as tl
    from torchlens import _hosts
    from torchlens._core import core

    versions = tl.versions()
    assert versions["core_component"] == "0.1.0"
    assert versions["core_build_id"] == core().build_id()
    # make test runs this file under each host (TORCHLENS_HOST); unset, the native one runs.
    expected_host = os.environ.get("TORCHLENS_HOST") or "native"
    assert versions["host"] == expected_host
    # The native host links wasmtime 48 (Cargo.toml); the pure host runs the wasmtime package.
    assert versions["wasmtime"] == {"native": "48.0.8", "wasmtime-py": "50.0.1"}[versions["host"]]
    assert _hosts.active().name == versions["host"]


def test_draw_produces_svg_for_the_graph_and_the_overview(tmp_path):
    import torch

    import torchlens as tl
    from conformance.models.torch import SmallCnn

    trace = tl.trace(SmallCnn().eval(), torch.randn(1, 3, 8, 8))
    full = trace.draw(str(tmp_path / "full.svg"))
    overview = trace.draw(collapsed=True)
    assert full._repr_svg_().startswith("<svg") or "<svg" in full.svg[:200]
    for op in trace.ops:
        assert op.label in full.svg
    assert "conv1:1" in overview.svg and "relu_1_" in overview.svg
    assert (tmp_path / "full.svg").read_text() == full.svg


def test_unknown_backend_and_bad_selectors_are_typed_errors():
    import pytest
    import torch

    import torchlens as tl

    with pytest.raises(tl.BackendUnsupportedError) as caught:
        tl.trace(torch.nn.Linear(2, 2), torch.randn(1, 2), backend="nope")
    assert caught.value.code == "backend_unknown"
    with pytest.raises(TypeError):
        tl.func(3)


def test_the_installed_package_is_typed_for_its_users_tools():
    # PEP 561: py.typed marks the package's annotations as its types; the extension's types are
    # in its stub, which must name what the package reads from it.
    import torchlens

    folder = os.path.dirname(torchlens.__file__)
    assert os.path.isfile(os.path.join(folder, "py.typed"))
    stub = open(os.path.join(folder, "_native.pyi"), encoding="utf-8").read()
    from torchlens._hosts.native import native_extension

    native = native_extension()
    for name in (
        "Core",
        "Session",
        "Trace",
        "core",
        "untrusted_core",
        "embedded_component",
        "WASMTIME_VERSION",
    ):
        assert hasattr(native, name) and (
            f"class {name}" in stub or f"def {name}" in stub or f"{name}:" in stub
        )
