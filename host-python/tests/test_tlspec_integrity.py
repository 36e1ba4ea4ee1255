"""Format version 2 checks every byte: a change to any one byte of a saved file makes
``tl.load(verify=True)`` fail with a typed error. Version 1 files still load. Saved files carry
no absolute paths by default, and sources point at the user's lines."""

from __future__ import annotations

import inspect
import json
import os
import struct
import tempfile

import pytest
import torch

import torchlens as tl
from torchlens import errors

pytestmark = pytest.mark.torch

SEED_V1 = os.path.join(
    os.path.dirname(__file__), "..", "..", "fuzz", "seeds", "decode_tlspec", "valid_demo.tlspec"
)


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x):
        return torch.relu(self.linear(x))


def _small_file(folder) -> bytes:
    torch.manual_seed(0)
    path = os.path.join(folder, "small.tlspec")
    tl.trace(Tiny().eval(), torch.randn(1, 2)).save(path)
    with open(path, "rb") as handle:
        return handle.read()


def _metadata(data: bytes) -> dict:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length])["__metadata__"]


def test_a_saved_file_is_version_2_with_its_checksums(tmp_path):
    data = _small_file(tmp_path)
    metadata = _metadata(data)
    assert metadata["format_version"] == "2"
    assert metadata["body_crc32"].isdigit()
    # The payloads' CRC-32s are in the table at the end of the file, not in the manifest.
    assert "payload_crc32" not in metadata
    (length,) = struct.unpack("<Q", data[:8])
    table = json.loads(data[8 : 8 + length])["__torchlens_payload_crc32__"]
    assert table["dtype"] == "U32" and 8 + length + table["data_offsets"][1] == len(data)


def flips_that_load(data: bytes, path) -> list:
    """Each byte of ``data`` with one bit flipped, written to ``path`` and loaded with
    ``verify=True``: the offsets whose change loaded anyway (every refusal must carry a
    ``tlspec_``/``trace_`` code)."""
    passed = []
    for index in range(len(data)):
        damaged = bytearray(data)
        damaged[index] ^= 0x01
        path.write_bytes(bytes(damaged))
        try:
            tl.load(str(path), verify=True)
        except errors.TlspecFormatError as error:
            assert error.code.startswith(("tlspec_", "trace_")), (index, error.code)
        else:
            passed.append(index)
    return passed


def test_load_with_verify_fails_for_a_change_to_any_byte(tmp_path):
    good = _small_file(tmp_path)
    path = tmp_path / "flipped.tlspec"
    path.write_bytes(good)
    tl.load(str(path), verify=True)
    passed = flips_that_load(good, path)
    assert passed == [], f"{len(passed)} of {len(good)} one-bit changes loaded"


def test_without_verify_the_header_and_body_are_still_checked(tmp_path):
    good = _small_file(tmp_path)
    (length,) = struct.unpack("<Q", good[:8])
    path = tmp_path / "damaged.tlspec"
    # A byte of a JSON string in the header (still valid JSON), then a byte of the body.
    at = good.index(b'"created_at":"') + len(b'"created_at":"')
    for index, code in (
        (at, "tlspec_header_checksum_mismatch"),
        (8 + length + 12, "tlspec_body_checksum_mismatch"),
    ):
        damaged = bytearray(good)
        damaged[index] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(errors.TlspecFormatError) as caught:
            tl.load(str(path))
        assert caught.value.code == code


def test_a_version_1_file_still_loads():
    from torchlens.backends import get_backend
    from torchlens.tlspec_io import load

    assert _metadata(open(SEED_V1, "rb").read())["format_version"] == "1"
    trace = load(SEED_V1, backend=get_backend("torch"))
    assert len(trace.ops) > 0
    assert trace["relu_1_4"].out.shape[-1] > 0


def test_a_saved_file_holds_no_absolute_path_by_default(tmp_path):
    home = os.path.expanduser("~").encode()
    temp = tempfile.gettempdir().encode()
    cwd = os.getcwd().encode()
    trace = tl.trace(Tiny().eval(), torch.randn(1, 2))
    assert any(op.source and op.source[0].startswith("/") for op in trace.ops), "sources are recorded"
    path = tmp_path / "shared.tlspec"
    trace.save(str(path))
    data = path.read_bytes()
    for secret in (home, temp, cwd, os.path.dirname(__file__).encode()):
        assert secret not in data, secret
    loaded = tl.load(str(path))
    assert loaded.manifest["extra"] == [("source_paths", "relative")]
    assert {op.source[0] for op in loaded.ops if op.source} == {os.path.basename(__file__)}


def test_source_paths_absolute_and_none(tmp_path):
    trace = tl.trace(Tiny().eval(), torch.randn(1, 2))
    absolute, none = tmp_path / "absolute.tlspec", tmp_path / "none.tlspec"
    trace.save(str(absolute), source_paths="absolute")
    trace.save(str(none), source_paths="none")
    assert os.path.abspath(__file__).encode() in absolute.read_bytes()
    assert all(op.source is None for op in tl.load(str(none)).ops)
    assert tl.load(str(none)).manifest["extra"] == [("source_paths", "none")]
    with pytest.raises(errors.UnsupportedError) as caught:
        trace.save(str(none), source_paths="home")
    assert caught.value.code == "tlspec_source_paths_invalid"


def test_every_op_points_at_the_users_line():
    """Frames inside torchlens and torch are skipped: a computed op's source is the line of the
    user's forward that ran it; no op points into the package (the output op has none)."""
    trace = tl.trace(Tiny().eval(), torch.randn(1, 2))
    first = inspect.getsourcelines(Tiny.forward)[1]
    this_file = os.path.abspath(__file__)
    computed = [op for op in trace.ops if op.kind == "compute"]
    assert computed
    for op in computed:
        assert op.source is not None, op.label
        file, line, function = op.source
        assert (file, function) == (this_file, "forward"), (op.label, op.source)
        assert first < line <= first + 2, (op.label, op.source)
    package = os.path.dirname(tl.__file__)
    for op in trace.ops:
        assert op.source is None or not op.source[0].startswith(package), (op.label, op.source)


@pytest.mark.parametrize(
    "name", sorted(name for name in os.listdir(os.path.dirname(SEED_V1)) if not name.startswith("valid_"))
)
def test_the_committed_hostile_files_get_typed_errors(name):
    with pytest.raises(errors.TlspecFormatError) as caught:
        tl.load(os.path.join(os.path.dirname(SEED_V1), name), verify=True)
    assert caught.value.code.startswith(("tlspec_", "trace_")) and caught.value.remedy
