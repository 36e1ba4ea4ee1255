"""Files from anyone stay harmless in the Python host: names from a file reach no terminal raw,
manifest text is bounded before it is parsed, the caller (not the file) picks the framework,
backend metadata is checked before JAX sees it, ``untrusted=True`` runs the core under the CLI's
limits, and payloads read into private memory survive the file changing.

Hostile files are built here from real saved traces, with their header rewritten and the
header checksum recomputed, so every check the file passes is a real one."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib

import pytest
import torch

import torchlens as tl
from torchlens import errors
from torchlens._core import core
from torchlens._hosts import active
from torchlens.terminal_text import _CONTROL, shown

pytestmark = pytest.mark.torch

#: An OSC that sets the window title, a screen clear, a C1 CSI, DEL and a right-to-left override.
ATTACK = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f\u202e"


def has_terminal_control(text: str) -> bool:
    """Whether ``text`` holds a character a terminal acts on (newlines aside)."""
    return any(
        (ord(char) < 0x20 and char != "\n")
        or 0x7F <= ord(char) <= 0x9F
        or 0x202A <= ord(char) <= 0x202E
        or 0x2066 <= ord(char) <= 0x2069
        for char in text
    )


def rewrite_manifest(path, **fields: str) -> None:
    """Sets manifest ``fields`` of a saved version 2 file and recomputes the header checksum
    (the CRC-32 of the length prefix and header, in the body's check block), as an attacker
    who knows the format would. The header keeps a multiple-of-8 length, so every tensor's
    offset (relative to the data) stays right."""
    with open(path, "rb") as handle:
        data = handle.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header["__metadata__"].update(fields)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    prefix = struct.pack("<Q", len(text)) + text
    rest = bytearray(data[8 + length :])
    rest[0:4] = struct.pack("<I", zlib.crc32(prefix))
    with open(path, "wb") as handle:
        handle.write(prefix + bytes(rest))


class Hostile(torch.nn.Module):
    """A model whose submodule name carries the attack (torch refuses only '.' and '')."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module(f"enc{ATTACK}", torch.nn.Linear(3, 3))

    def forward(self, x):
        return torch.relu(getattr(self, f"enc{ATTACK}")(x))


def saved(tmp_path, name: str = "t.tlspec", model=None) -> str:
    torch.manual_seed(0)
    path = str(tmp_path / name)
    tl.trace((model or Hostile()).eval(), torch.randn(2, 3)).save(path)
    return path


# ---- terminal text -------------------------------------------------------------------------


def test_summary_and_reprs_escape_names_from_the_file_and_data_stays_exact(tmp_path):
    path = saved(tmp_path)
    rewrite_manifest(path, created_at=f"2025{ATTACK}")
    trace = tl.load(path)
    summary = trace.summary()
    assert not has_terminal_control(summary), repr(summary)
    assert "\\x1b]0;pwned\\x07" in summary and "\\u{202e}" in summary

    def each(collection):
        return list(collection.values()) if isinstance(collection, dict) else list(collection)

    things = each(trace.ops) + each(trace.modules) + each(trace.layers) + each(trace.params)
    assert things
    for thing in things:
        assert not has_terminal_control(repr(thing)), repr(thing)
    # The data keeps the name exactly.
    assert any(ATTACK in module.address for module in each(trace.modules))
    assert trace._manifest["created_at"] == f"2025{ATTACK}"


def add_tensor(path, name: str, entry: dict) -> None:
    """Adds a tensor entry to a saved file's header (no checksum recomputed: the entry is
    refused while the header is read, before any checksum is checked)."""
    with open(path, "rb") as handle:
        data = handle.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header[name] = entry
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(text)) + text + data[8 + length :])


HOSTILE_TENSOR = f"w{ATTACK}"
BAD_ENTRY = {"dtype": "U8", "shape": [5], "data_offsets": [0, 4]}


def test_error_messages_quoting_the_file_are_escaped(tmp_path):
    path = saved(tmp_path)
    add_tensor(path, HOSTILE_TENSOR, BAD_ENTRY)
    with pytest.raises(errors.TlspecFormatError) as caught:
        tl.load(path)
    assert caught.value.code == "tlspec_offsets_invalid"
    assert "w\\x1b]0;pwned" in caught.value.message, caught.value.message
    assert not has_terminal_control(str(caught.value)), str(caught.value)
    # The wasmtime-py host escapes them the same way.
    result = run_python(
        f"""
        import torchlens as tl
        from torchlens import errors
        try:
            tl.load({path!r})
        except errors.TlspecFormatError as error:
            print(str(error))
        """,
        env={"TORCHLENS_HOST": "wasmtime-py"},
    )
    assert result.returncode == 0, result.stderr
    assert "w\\x1b]0;pwned" in result.stdout, result.stdout
    assert not has_terminal_control(result.stdout), result.stdout


def test_the_python_prefilter_agrees_with_the_core_on_every_character():
    native = core()
    for code in list(range(0x3000)) + list(range(0xFFF0, 0x10000)):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        escaped = native.escape_terminal_text(char) != char
        assert escaped == bool(_CONTROL.search(char)), hex(code)
        assert not has_terminal_control(shown(char)), hex(code)


# ---- bounded manifest text ------------------------------------------------------------------


@pytest.mark.parametrize(
    "codec, code",
    [
        ('{"a":"' + "x" * (4 << 20) + '"}', "tlspec_codec_metadata_too_large"),
        ('{"a":' + "[" * 200_000 + "]" * 200_000 + "}", "tlspec_codec_metadata_too_deep"),
        ('{"a":' + "[" * 64 + "]" * 64 + "}", "tlspec_codec_metadata_too_deep"),
        ("[1, 2]", "tlspec_codec_metadata_invalid"),
        ('{"a":', "tlspec_codec_metadata_invalid"),
    ],
    ids=["4mib_plus", "200000_deep", "65_deep", "not_an_object", "not_json"],
)
def test_codec_metadata_is_bounded_before_it_is_parsed(tmp_path, codec, code):
    path = saved(tmp_path)
    rewrite_manifest(path, codec_metadata=codec)
    with pytest.raises(errors.TlspecFormatError) as caught:
        tl.load(path)
    assert caught.value.code == code


def test_files_that_are_no_tlspec_at_all_say_so(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("just some notes, not a trace\n")
    saved_model = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2).state_dict(), saved_model)
    for path in (text, saved_model):
        with pytest.raises(errors.TlspecFormatError) as caught:
            tl.load(str(path))
        assert caught.value.code == "tlspec_not_a_tlspec", path
        assert "hostile" not in caught.value.message


# ---- the caller picks the framework ---------------------------------------------------------


def test_a_pinned_backend_refuses_a_file_that_names_another(tmp_path):
    path = saved(tmp_path)
    assert tl.load(path, backend="torch").backend == "torch"
    with pytest.raises(errors.TlspecFormatError) as caught:
        tl.load(path, backend="jax")
    assert caught.value.code == "tlspec_backend_mismatch"
    rewrite_manifest(path, backend="tf")
    with pytest.raises(errors.TlspecFormatError) as caught:
        tl.load(path, backend="torch")
    assert caught.value.code == "tlspec_backend_mismatch"


def run_python(code: str, env: dict = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_a_relabelled_file_loaded_with_a_pinned_backend_imports_no_other_framework(tmp_path):
    path = saved(tmp_path)
    rewrite_manifest(path, backend="tf")
    result = run_python(
        f"""
        import sys
        import torchlens as tl
        from torchlens import errors
        try:
            tl.load({path!r}, backend="torch")
        except errors.TlspecFormatError as error:
            print(error.code)
        print(sorted(name for name in ("tensorflow", "jax", "paddle", "mlx", "tinygrad")
                     if name in sys.modules))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["tlspec_backend_mismatch", "[]"], result.stdout


@pytest.mark.jax
def test_jax_codec_metadata_is_checked_before_jax_sees_it(tmp_path):
    import jax.numpy as jnp

    path = str(tmp_path / "j.tlspec")
    tl.trace(lambda x: jnp.tanh(x) * 2.0, jnp.ones((3,), jnp.float32)).save(path)
    label = next(op.label for op in tl.load(path).ops if op.out is not None)
    for keys in ({label: "evil_impl"}, {label: "threefry2x32"}, {"nope": "rbg"}, ["x"]):
        rewrite_manifest(path, codec_metadata=json.dumps({"jax_prng_keys": keys}))
        with pytest.raises(errors.TlspecFormatError) as caught:
            tl.load(path, backend="jax")
        assert caught.value.code == "tlspec_codec_metadata_invalid", keys
    bad_sharding = {
        label: {"jax_named_sharding": {"axis_names": ["x"], "mesh_shape": [-1], "partition_spec": []}}
    }
    rewrite_manifest(path, codec_metadata=json.dumps({"jax_sharding": bad_sharding}))
    with pytest.raises(errors.TlspecFormatError) as caught:
        tl.load(path, backend="jax")
    assert caught.value.code == "tlspec_codec_metadata_invalid"


# ---- the CLI's limits, private memory -------------------------------------------------------


def test_untrusted_loads_run_under_the_sandbox_limits_in_an_instance_of_their_own(tmp_path):
    path = saved(tmp_path)
    sandboxed = active().untrusted_core()
    assert sandboxed.sandboxed() and not core().sandboxed()
    trusted = tl.load(path)
    untrusted = tl.load(path, untrusted=True, verify=True)
    assert untrusted.summary() == trusted.summary()
    for a, b in zip(trusted.ops, untrusted.ops):
        if a.out is not None:
            assert torch.equal(a.out, b.out)


def test_the_wasmtime_py_host_runs_untrusted_loads_under_the_same_limits(tmp_path):
    path = saved(tmp_path)
    result = run_python(
        f"""
        import torchlens as tl
        from torchlens._core import core
        from torchlens._hosts import active
        assert active().name == "wasmtime-py"
        assert active().untrusted_core().sandboxed() and not core().sandboxed()
        trace = tl.load({path!r}, untrusted=True, verify=True)
        print(len(trace.ops))
        """,
        env={"TORCHLENS_HOST": "wasmtime-py"},
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) == len(tl.load(path).ops)


def test_the_wasmtime_py_limits_stop_a_call_with_the_limit_code():
    # The untrusted runtime's budget is far above any real call; a tiny one shows the metering
    # works and names the limit, as the native host's trap codes do.
    from torchlens._hosts.wasmtime_py import component_bytes
    from torchlens._hosts.wasmtime_py.runtime import UNTRUSTED, Runtime

    instance = Runtime(component_bytes(), UNTRUSTED._replace(fuel_per_call=2000)).instantiate()
    with pytest.raises(errors.CoreTrapError) as caught:
        instance.call("refusal-codes")
    assert caught.value.code == "sandbox_fuel_exhausted"
    assert "untrusted=True" in caught.value.remedy
    instance.close()


def save_linear(path: str) -> list:
    """Saves a trace with 1 MiB payloads at ``path``; returns the sums of its saved values."""
    torch.manual_seed(0)
    tl.trace(torch.nn.Linear(512, 512).eval(), torch.randn(512, 512)).save(path)
    trace = tl.load(path, in_memory=True)
    return [float(op.out.double().sum()) for op in trace.ops if op.out is not None]


def test_payloads_read_into_private_memory_survive_the_file_being_truncated(tmp_path):
    path = str(tmp_path / "big.tlspec")
    # In a subprocess, so a SIGBUS would show as a signal exit rather than end this run.
    for options in ("untrusted=True", "in_memory=True, verify=True"):
        expected = save_linear(path)
        result = run_python(
            f"""
            import os
            import torchlens as tl
            trace = tl.load({path!r}, {options})
            os.truncate({path!r}, 64)
            print([float(op.out.double().sum()) for op in trace.ops if op.out is not None])
            """
        )
        assert result.returncode == 0, (options, result.returncode, result.stderr)
        assert json.loads(result.stdout) == expected, options


def test_a_mapped_file_that_shrank_is_a_typed_error_before_a_view_is_made(tmp_path):
    path = str(tmp_path / "big.tlspec")
    save_linear(path)
    result = run_python(
        f"""
        import os
        import torchlens as tl
        from torchlens import errors
        trace = tl.load({path!r})
        os.truncate({path!r}, 64)
        op = next(op for op in trace.ops if op.saved)
        for read in (op.numpy, lambda: op.out):
            try:
                read()
                print("read")
            except errors.TlspecFormatError as error:
                print(error.code)
        """
    )
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.split() == ["tlspec_file_changed", "tlspec_file_changed"], result.stdout


# ---- a file opens without its framework -----------------------------------------------------

FRAMEWORKS = ("torch", "jax", "tensorflow", "paddle", "mlx", "tinygrad")

#: Run in a fresh interpreter: load a file and use everything that needs no framework, then
#: print which frameworks got imported. ``BLOCKED`` frameworks cannot be imported at all.
READ_WITHOUT_FRAMEWORK = """
import importlib.abc, json, sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None

sys.meta_path.insert(0, Blocker())
import torchlens as tl
from torchlens import errors

trace = tl.load(PATH)
report = {
    "backend": trace.backend,
    "ops": len(trace.ops),
    "summary": "ops," in trace.summary(),
    "selected": len(trace.select(tl.func(FUNC))),
    "drawn": trace.draw().svg.startswith("<svg"),
    "numpy": [op.numpy().tolist() for op in trace.ops if op.saved][:1],
    "imported": sorted(name for name in FRAMEWORKS if name in sys.modules),
}
try:
    next(op for op in trace.ops if op.saved).out
    report["out"] = "converted"
except errors.BackendUnsupportedError as error:
    report["out"] = [error.code, error.remedy]
print(json.dumps(report))
"""


def read_without_framework(path: str, func: str, blocked: tuple) -> dict:
    prelude = f"PATH = {path!r}\nFUNC = {func!r}\nBLOCKED = {blocked!r}\nFRAMEWORKS = {FRAMEWORKS!r}\n"
    result = run_python(prelude + READ_WITHOUT_FRAMEWORK)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_torch_file_reads_without_importing_torch(tmp_path):
    torch.manual_seed(0)
    path = str(tmp_path / "t.tlspec")
    trace = tl.trace(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()).eval(), torch.randn(2, 3))
    trace.save(path)
    first = next(op for op in trace.ops if op.saved)
    report = read_without_framework(path, "relu", ())
    assert report["imported"] == [], report
    assert report["backend"] == "torch" and report["ops"] == len(trace.ops) and report["summary"]
    assert report["selected"] == 1 and report["drawn"]
    assert report["numpy"] == [first.out.numpy().tolist()]
    # Asked for a torch tensor, it imports torch then (it is installed).
    assert report["out"] == "converted"
    # Where torch cannot be imported, the same reads work and the conversion is refused with
    # the install extra.
    report = read_without_framework(path, "relu", ("torch",))
    assert report["imported"] == [] and report["numpy"] == [first.out.numpy().tolist()]
    assert report["out"][0] == "framework_not_installed" and "torchlens[torch]" in report["out"][1]


@pytest.mark.jax
def test_a_jax_file_opens_where_jax_is_not_installed(tmp_path):
    import jax.numpy as jnp
    import numpy as np

    path = str(tmp_path / "j.tlspec")
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    tl.trace(lambda value: jnp.tanh(value) * 2.0, x).save(path)
    report = read_without_framework(path, "tanh", ("jax", "jaxlib"))
    assert report["imported"] == [], report
    assert report["backend"] == "jax" and report["summary"] and report["selected"] == 1
    assert report["numpy"] == [np.asarray(x).tolist()]
    assert report["out"][0] == "framework_not_installed" and "torchlens[jax]" in report["out"][1]
