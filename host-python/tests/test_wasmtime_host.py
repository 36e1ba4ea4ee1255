"""The two hosts of the core component (torchlens/_hosts): the pyo3 extension and the
``wasmtime`` package. Fed the same events, they hold the same trace and answer every query
alike; the README example writes the same `.tlspec` under each; the pure wheel carries the
component the extension embeds. (make test runs this file under each host: both_hosts.)"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import torchlens as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "checks"))

native_extension = pytest.importorskip("torchlens._native", reason="the native host is not built here")

pytestmark = pytest.mark.both_hosts


def _cores():
    from torchlens._hosts import wasmtime_py

    return native_extension.core(), wasmtime_py.core()


BIG = 2**40 + 5  # a value id past 32 bits: multi-byte varints


def _feed(session) -> None:
    """Every kind of raw event, with multi-byte varints, non-ASCII text and a dtype the core
    has no name for."""
    session.module(0, ["self"], "Net", False, True)
    session.module(1, ["fc", "alias.fc"], "Linear", False, False)
    session.param(10, "fc.weight", 1, (4, 3), "float32", True)
    session.input("x", 1, (2, 3), "float32", 1)
    session.constant(3, (), "bfloat16", None)
    session.enter(0)
    session.enter(1)
    session.op(
        "linear",
        [(1, 0), (10, 1)],
        [(BIG, (2, 4), "float32", 300)],
        False,
        [("bias", "None"), ("ünïcödé", "✓")],
        ("model.py", 300, "forward"),
    )
    session.exit(1, [BIG])
    session.op("__add__", [(BIG, 0), (3, 1)], [(6, (2, 4), "weird_dtype", None)], True, [], None)
    session.edit(6, "0", "zero_ablate", "output")
    session.extra("note", "ß")
    session.exit(0, [6])
    session.output("out", 6)


def _finished(core):
    session = core.start_session(True, True)
    _feed(session)
    assert session.pending_events() == 14
    trace, decisions = session.finish()
    return trace, decisions


def test_the_same_events_make_the_same_trace_under_both_hosts():
    native, pure = _cores()
    assert native.build_id() == pure.build_id()
    (native_trace, native_decisions), (pure_trace, pure_decisions) = _finished(native), _finished(pure)
    assert pure_decisions == native_decisions
    # The body is the core's own serialization of the whole trace: equal bytes mean the pure
    # host's postcard events decoded to the same trace.
    assert pure_trace.body() == native_trace.body()
    assert pure_trace.info() == native_trace.info()
    assert pure_trace.ops() == native_trace.ops()
    assert pure_trace.ops(1, 1) == native_trace.ops(1, 1)
    assert pure_trace.layers() == native_trace.layers()
    assert pure_trace.modules() == native_trace.modules()
    assert pure_trace.params() == native_trace.params()
    assert pure_trace.summary_table() == native_trace.summary_table()
    assert pure_trace.svg() == native_trace.svg()
    assert pure_trace.svg(True, ["fc"]) == native_trace.svg(True, ["fc"])
    label = native_trace.ops()[1]["label"]
    assert pure_trace.find_label(label) == native_trace.find_label(label) is not None
    assert pure_trace.find_label("nope_9_9") is None
    assert pure_trace.ancestors(2) == native_trace.ancestors(2)
    assert pure_trace.descendants(0) == native_trace.descendants(0)
    selector = (tl.func("linear") | tl.in_module("fc")).arena()
    assert pure_trace.select(selector) == native_trace.select(selector)


def test_an_unverified_capture_makes_the_same_trace_under_both_hosts():
    """``mark_unverified`` (a backend's note that part of a capture went unseen: MLX's unwrapped
    ops) reaches the core alike from either host. The torch backend never sends it, so no test
    of the second host's run (make test: SECOND_HOST_TESTS) would otherwise."""
    finished = []
    for core in _cores():
        session = core.start_session(True, True)
        _feed(session)
        session.mark_unverified("unwrapped_op_in_capture")
        trace, _ = session.finish()
        finished.append((trace.body(), trace.info()))
    assert finished[1] == finished[0]
    info = finished[0][1]
    assert info["capture_verified"] is False and info["capture_reason"] == "unwrapped_op_in_capture"


def test_tlspec_layout_and_decode_agree_under_both_hosts():
    native, pure = _cores()
    manifest = {
        "backend": "numpy",
        "created_at": "2026-01-01T00:00:00+00:00",
        "codec_metadata": "{}",
        "extra": [("source_paths", "none")],
    }
    layouts = []
    for core in (native, pure):
        trace, _ = _finished(core)
        trace.keep_payloads([1])
        layouts.append(trace.encode(manifest))
    assert layouts[1] == layouts[0]
    prefix, placements, crc_table_offset, file_length = layouts[0]
    # One payload kept: the payload CRC-32 table (4 bytes) follows it and ends the file.
    assert crc_table_offset == placements[-1][3] + placements[-1][4] == file_length - 4
    header_length = native.tlspec_header_length(prefix[:8])
    assert pure.tlspec_header_length(prefix[:8]) == header_length
    header = prefix[: 8 + header_length]
    assert pure.parse_tlspec_header(header, file_length) == native.parse_tlspec_header(header, file_length)
    body = prefix[8 + header_length :]
    (native_info, native_trace), (pure_info, pure_trace) = (
        core.decode_tlspec(header, body, file_length) for core in (native, pure)
    )
    assert pure_info == native_info
    assert pure_trace.body() == native_trace.body()
    assert pure.trace_from_body(native_trace.body()).ops() == native_trace.ops()


def test_refusals_are_the_same_typed_errors_under_both_hosts():
    caught = []
    for core in _cores():
        session = core.start_session(False, False)
        session.input("x", 1, (2,), "float32", None)
        with pytest.raises(tl.TorchLensError) as stopped:
            session.mark_stopped("test", [999])
        with pytest.raises(tl.TorchLensError) as malformed:
            core.parse_tlspec_header(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ", 100)
        with pytest.raises(tl.TorchLensError) as selector:
            core.classify_selector(([("and", [5])], 0))
        with pytest.raises(tl.TorchLensError) as expression:
            core.parse_selector("func:relu &")
        caught.append(
            [(type(error.value), error.value.code) for error in (stopped, malformed, selector, expression)]
        )
    assert caught[1] == caught[0]
    assert caught[0][0][1] == "events_unknown_frontier_value"


def test_the_backend_contract_answers_alike_under_both_hosts():
    native, pure = _cores()
    assert pure.refusal_codes() == native.refusal_codes()
    assert pure.validation_reasons() == native.validation_reasons()
    assert pure.capabilities() == native.capabilities()
    assert pure.op_type("__radd__") == native.op_type("__radd__") == "add"
    expression = "followed_by(func:linear, relu, 2) & ~in_module:encoder | upstream_of(module:head:2)"
    assert pure.parse_selector(expression) == native.parse_selector(expression)
    decisions = [(0, "passed", ""), (1, "failed", "mismatch"), (2, "not_replayable", "")]
    assert pure.fold_validation(decisions, True) == native.fold_validation(decisions, True)
    flags = [(name, False) for name, _, _ in native.capabilities()]
    assert pure.gate("x", flags, [], flags[0][0]) == native.gate("x", flags, [], flags[0][0]) is not None


def test_a_plan_session_compiles_the_same_live_plan_under_both_hosts():
    plans = []
    for core in _cores():
        session = core.start_session(False, False, (tl.func("relu") & tl.in_module("fc")).arena())
        session.module(0, ["self"], "Net", False, True)
        session.module(1, ["fc"], "Linear", False, False)
        session.flush()
        rule = session.add_rule(tl.func("linear").arena())
        plans.append((session.live_plan(), session.rule_plan(rule)))
        session.abandon()
    assert plans[1] == plans[0]


def test_the_readme_example_writes_the_same_tlspec_under_both_hosts():
    """Done-when 1 of the pure wheel (issue 20), in this checkout: scripts/checks/
    host_tlspec_equality.py --pure-python runs the pure side in a venv holding only the wheel."""
    from host_tlspec_equality import compare

    assert compare(sys.executable, None) == 0


def test_an_unknown_host_name_is_a_typed_error():
    code = (
        "import torchlens as tl\ntry:\n    tl.versions()\nexcept tl.TorchLensError as e:\n    print(e.code)"
    )
    environment = dict(os.environ, TORCHLENS_HOST="wasmer")
    output = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    assert output.stdout.strip() == "core_host_unknown", output.stderr


def test_the_pure_wheel_carries_the_embedded_component_and_needs_wasmtime(tmp_path):
    from build_pure_wheel import build

    component = tmp_path / "core.wasm"
    component.write_bytes(native_extension.embedded_component())
    wheel = build(component, tmp_path / "dist")
    assert wheel.name == f"torchlens-{tl.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert archive.read("torchlens/torchlens_core.wasm") == native_extension.embedded_component()
        metadata = archive.read(f"torchlens-{tl.__version__}.dist-info/METADATA").decode()
        wheel_tags = archive.read(f"torchlens-{tl.__version__}.dist-info/WHEEL").decode()
    assert "Requires-Dist: wasmtime>=50,<51" in metadata
    assert "Tag: py3-none-any" in wheel_tags
    assert not [name for name in names if name.endswith((".so", ".pyd", ".pyc"))]
    assert "torchlens/_hosts/wasmtime_py/runtime.py" in names
    assert "torchlens/backends/torch/scorecard.json" in names
    # Typed for its users' tools, as the platform wheel is (test_package.py).
    assert "torchlens/py.typed" in names and "torchlens/_native.pyi" in names


@pytest.mark.parametrize("host", ["native", "wasmtime-py"])
def test_doctor_names_the_host_and_the_component_build(host):
    environment = dict(os.environ, TORCHLENS_HOST=host)
    output = subprocess.run(
        [sys.executable, "-m", "torchlens", "doctor"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    first = output.splitlines()[0]
    assert f"on the {host} host" in first
    assert native_extension.core().build_id() in first
