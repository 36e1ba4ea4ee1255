"""The payload CRC-32 table: ``trace.save`` writes each payload's CRC-32, computed while the
payload is written (a worker thread checksums each chunk as the main thread writes it), into
the ``__torchlens_payload_crc32__`` tensor at the end of the file; ``tl.load(verify=True)``
checks payloads against it; files written before the table (``payload_crc32`` in the
manifest) still load and verify."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import zlib

import pytest
import torch
from test_tlspec_integrity import flips_that_load

import torchlens as tl
from torchlens import errors
from torchlens.payload_sink import CHUNK_BYTES, PARALLEL_MIN_BYTES, PayloadSink
from torchlens.tlspec_io import payload_crc32s

pytestmark = pytest.mark.torch

TABLE = "__torchlens_payload_crc32__"
LEGACY = os.path.join(
    os.path.dirname(__file__), "..", "..", "fuzz", "seeds", "decode_tlspec", "valid_v2_manifest_crc32.tlspec"
)


class Sizes(torch.nn.Module):
    """Values from a few bytes to several chunks of the writer, a bool and a bfloat16 one, and a
    non-contiguous one (a transpose: its bytes are a contiguous copy made at save time)."""

    def forward(self, x):
        big = x.repeat(3, 1) * 2  # 3 x 1.5M float32 = 18 MB: several writer chunks
        small = x[:, :3] + 1  # 12 bytes: checksummed on the main thread
        flags = small > 1.5
        half = small.to(torch.bfloat16)
        turned = big.reshape(1536, -1).t() + 0  # computed, then viewed: not contiguous
        strided = turned.t()
        return big.sum() + small.sum() + flags.sum() + half.float().sum() + strided[0, 0]


def _header(data: bytes) -> dict:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length])


def _table_and_payloads(data: bytes):
    header = _header(data)
    start = 8 + struct.unpack("<Q", data[:8])[0]
    payloads = sorted(
        (entry["data_offsets"], label)
        for label, entry in header.items()
        if label not in ("__metadata__", "__torchlens_body__", TABLE)
    )
    begin, end = header[TABLE]["data_offsets"]
    table = struct.unpack(f"<{len(payloads)}I", data[start + begin : start + end])
    return header, table, [(label, data[start + b : start + e]) for (b, e), label in payloads]


@pytest.fixture(scope="module")
def sizes_trace():
    torch.manual_seed(0)
    return tl.trace(Sizes().eval(), torch.randn(2, 1 << 20))


def test_the_table_holds_zlibs_crc32_of_every_payload_in_file_order(tmp_path, sizes_trace):
    path = tmp_path / "sizes.tlspec"
    sizes_trace.save(str(path))
    data = path.read_bytes()
    header, table, payloads = _table_and_payloads(data)
    assert "payload_crc32" not in header["__metadata__"]
    assert header[TABLE]["dtype"] == "U32" and header[TABLE]["shape"] == [len(payloads)]
    assert header[TABLE]["data_offsets"][1] + 8 + struct.unpack("<Q", data[:8])[0] == len(data)
    sizes = [len(payload) for _, payload in payloads]
    assert max(sizes) > 2 * CHUNK_BYTES and min(sizes) < PARALLEL_MIN_BYTES, sizes
    assert list(table) == [zlib.crc32(payload) for _, payload in payloads]
    # The same checksums through the package's reader (the core parses the header).
    assert payload_crc32s(str(path)) == {label: zlib.crc32(payload) for label, payload in payloads}
    loaded = tl.load(str(path), verify=True)
    for op in sizes_trace.saved_ops:
        assert torch.equal(loaded[op.label].out, op.out), op.label


def test_a_non_contiguous_value_is_saved_as_its_contiguous_bytes(tmp_path, sizes_trace):
    strided = [op for op in sizes_trace.saved_ops if not op.out.is_contiguous()]
    assert strided, "the model keeps a non-contiguous value"
    path = tmp_path / "strided.tlspec"
    sizes_trace.save(str(path))
    _, table, payloads = _table_and_payloads(path.read_bytes())
    by_label = dict(payloads)
    crcs = dict(zip([label for label, _ in payloads], table))
    for op in strided:
        expected = op.out.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        assert by_label[op.label] == expected
        assert crcs[op.label] == zlib.crc32(expected)
        assert torch.equal(tl.load(str(path), verify=True)[op.label].out, op.out)


def test_the_sink_checksums_what_it_writes_chunk_by_chunk(tmp_path):
    """Sizes around the chunk and hand-over thresholds, written through one sink: each
    recorded CRC-32 is zlib's of the bytes, and the file holds exactly those bytes."""
    generator = torch.Generator().manual_seed(1)
    sizes = [0, 1, PARALLEL_MIN_BYTES - 1, PARALLEL_MIN_BYTES, CHUNK_BYTES - 1, CHUNK_BYTES]
    sizes.append(2 * CHUNK_BYTES + 5)
    blobs = [torch.randint(0, 256, (size,), dtype=torch.uint8, generator=generator).numpy() for size in sizes]
    path = tmp_path / "sink.bin"
    with open(path, "wb", buffering=0) as out, PayloadSink(out.fileno(), 0) as sink:
        sink.write_raw(b"prefix!!")
        for blob in blobs:
            half = len(blob) // 2
            sink.write(memoryview(blob[:half]))  # a payload may arrive in pieces
            sink.write(memoryview(blob[half:]))
            assert sink.finish_payload() == (len(blob), zlib.crc32(blob.tobytes()))
        table = sink.crc_table()
    assert path.read_bytes() == b"prefix!!" + b"".join(blob.tobytes() for blob in blobs)
    assert struct.unpack(f"<{len(blobs)}I", table) == tuple(zlib.crc32(blob.tobytes()) for blob in blobs)


def test_the_sink_keeps_no_reference_to_a_payload_once_written(tmp_path):
    """A temporary contiguous copy (a non-contiguous value's) is freed as soon as write()
    returns, so a save never holds two copies at once."""
    import weakref

    import numpy

    path = tmp_path / "sink.bin"
    with open(path, "wb", buffering=0) as out, PayloadSink(out.fileno(), 0) as sink:
        for size in (PARALLEL_MIN_BYTES // 2, 3 * CHUNK_BYTES + 1):
            copy = numpy.arange(size, dtype=numpy.uint8)
            alive = weakref.ref(copy)
            sink.write(memoryview(copy))
            del copy
            assert alive() is None, size
            sink.finish_payload()


def test_verify_catches_a_flipped_payload_byte_and_a_flipped_table_byte(tmp_path, sizes_trace):
    path = tmp_path / "good.tlspec"
    sizes_trace.save(str(path))
    good = path.read_bytes()
    header = _header(good)
    start = 8 + struct.unpack("<Q", good[:8])[0]
    label = next(op.label for op in sizes_trace.saved_ops if op.out.nbytes > CHUNK_BYTES)
    payload_at = start + header[label]["data_offsets"][0] + CHUNK_BYTES + 3  # in its second chunk
    table_at = start + header[TABLE]["data_offsets"][0] + 1
    for where in (payload_at, table_at):
        damaged = bytearray(good)
        damaged[where] ^= 0x20
        path.write_bytes(bytes(damaged))
        tl.load(str(path))  # payloads are not read without verify=True
        with pytest.raises(errors.TlspecFormatError) as caught:
            tl.load(str(path), verify=True)
        assert caught.value.code == "tlspec_payload_checksum_mismatch", where
        assert caught.value.remedy


def test_a_file_with_payload_crc32_in_its_manifest_still_loads_and_verifies(tmp_path):
    # Written by the package before the table existed (torch: float32, bfloat16 and bool).
    data = open(LEGACY, "rb").read()
    metadata = _header(data)["__metadata__"]
    assert metadata["format_version"] == "2" and TABLE not in _header(data)
    recorded = json.loads(metadata["payload_crc32"])
    trace = tl.load(LEGACY, verify=True)
    assert {op.label for op in trace.saved_ops} == set(recorded)
    assert payload_crc32s(LEGACY) == recorded
    assert trace["gt_1_5"].out.dtype == torch.bool
    assert trace["to_1_4"].out.dtype == torch.bfloat16
    # Every one-bit change is still caught, the payloads' by their manifest checksums.
    path = tmp_path / "legacy.tlspec"
    passed = flips_that_load(data, path)
    assert passed == [], f"{len(passed)} of {len(data)} one-bit changes loaded"


def test_a_streamed_capture_writes_the_table_from_its_spool(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "streamed.tlspec"
    model, x = Sizes().eval(), torch.randn(2, 1 << 18)
    streamed = tl.trace(model, x, streaming=tl.StreamingOptions(path=str(path)))
    _, table, payloads = _table_and_payloads(path.read_bytes())
    assert list(table) == [zlib.crc32(payload) for _, payload in payloads]
    assert len(payloads) == len(streamed.saved_ops)
    tl.load(str(path), verify=True)


WRITE_FAILS_MIDWAY = r"""
import os, resource, signal, sys
import torch
import torchlens as tl
sys.path.insert(0, sys.argv[2])
from test_tlspec_crc_table import Sizes

path = sys.argv[1]
torch.manual_seed(0)
trace = tl.trace(Sizes().eval(), torch.randn(2, 1 << 20))
trace.save(path)
before = open(path, "rb").read()
threads = {thread.name for thread in __import__("threading").enumerate()}
# The file system refuses the write past 12 MB (as a full disk would): EFBIG, not a signal.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (12 << 20, hard))
try:
    trace.save(path)
except OSError as error:
    print("failed:", error.errno == __import__("errno").EFBIG)
finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print("intact:", open(path, "rb").read() == before)
print("leftovers:", sorted(name for name in os.listdir(os.path.dirname(path)) if name != "kept.tlspec"))
print("threads:", {thread.name for thread in __import__("threading").enumerate()} == threads)
"""


def test_a_failure_mid_write_leaves_no_file_under_the_final_name(tmp_path):
    path = tmp_path / "kept.tlspec"
    finished = subprocess.run(
        [sys.executable, "-c", WRITE_FAILS_MIDWAY, str(path), os.path.dirname(__file__)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split("\n")[:4] == [
        "failed: True",
        "intact: True",
        "leftovers: []",
        "threads: True",
    ], finished.stdout
    # And a file that never existed is not created by a failed save (payload source raising).
    fresh = tmp_path / "fresh.tlspec"
    trace = tl.trace(Sizes().eval(), torch.randn(2, 1 << 10))
    from torchlens.tlspec_io import write_tlspec

    written = []

    def fail_on_third(sink, slot):
        if len(written) == 2:
            raise RuntimeError("the source went away")
        written.append(slot)
        sink.write(trace._backend.payload_bytes(trace._payload(slot)))

    before = threading.active_count()
    with pytest.raises(RuntimeError):
        write_tlspec(trace, str(fresh), "relative", fail_on_third)
    assert not fresh.exists()
    assert [name for name in os.listdir(tmp_path) if name.endswith(".partial")] == []
    assert threading.active_count() == before
