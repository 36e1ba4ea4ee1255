"""trace.save / tl.load: metadata and payloads round-trip bit for bit; the file is a safetensors
file; damaged files raise typed errors."""

from __future__ import annotations

import json
import os

import pytest
import torch

import torchlens as tl
from conformance.models.torch import Loop, Mlp, SmallCnn

pytestmark = pytest.mark.torch


def bits(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_save_and_load_round_trip_bit_for_bit(tmp_path, dtype):
    torch.manual_seed(1)
    model = SmallCnn().eval().to(dtype)
    trace = tl.trace(model, torch.randn(2, 3, 8, 8, dtype=dtype))
    path = tmp_path / "cnn.tlspec"
    trace.save(str(path), source_paths="absolute")
    loaded = tl.load(str(path))
    assert loaded.labels == trace.labels
    assert loaded.summary() == trace.summary()
    for before, after in zip(trace.ops, loaded.ops):
        assert after.func_name == before.func_name
        assert after.module_stack == before.module_stack
        assert after.shape == before.shape and after.dtype == before.dtype
        assert [p.label for p in after.parents] == [p.label for p in before.parents]
        assert after.source == before.source
        if before.out is None:
            assert after.out is None
            continue
        assert after.out.dtype == before.out.dtype
        assert bits(after.out) == bits(before.out), before.label
    assert {k: (m.class_name, m.num_calls) for k, m in loaded.modules.items()} == {
        k: (m.class_name, m.num_calls) for k, m in trace.modules.items()
    }
    assert set(loaded.params) == set(trace.params)


def test_passes_bool_and_integer_payloads_round_trip(tmp_path):
    def fn(x):
        mask = x > 0
        index = torch.argmax(x, dim=-1)
        return x * mask, index

    trace = tl.trace(fn, torch.randn(3, 4))
    path = tmp_path / "mixed.tlspec"
    trace.save(str(path))
    loaded = tl.load(str(path))
    gt = [op for op in loaded.ops if op.func_name == "__gt__" or op.op_type == "gt"][0]
    assert gt.out.dtype == torch.bool
    assert torch.equal(gt.out, trace[gt.label].out)
    argmax = [op for op in loaded.ops if op.func_name == "argmax"][0]
    assert argmax.out.dtype == torch.int64
    looped = tl.trace(Loop().eval(), torch.randn(2, 6))
    looped.save(str(tmp_path / "loop.tlspec"))
    reloaded = tl.load(str(tmp_path / "loop.tlspec"))
    assert reloaded.labels == looped.labels
    assert torch.equal(reloaded["tanh_1_3:4"].out, looped["tanh_1_3:4"].out)


def test_the_file_opens_with_the_safetensors_package(tmp_path):
    from safetensors import safe_open

    trace = tl.trace(Mlp().eval(), torch.randn(2, 8))
    path = tmp_path / "mlp.tlspec"
    trace.save(str(path))
    with safe_open(str(path), framework="pt") as handle:
        assert handle.metadata()["format"] == "tlspec"
        assert handle.metadata()["backend"] == "torch"
        for op in trace.saved_ops:
            assert torch.equal(handle.get_tensor(op.label), op.out), op.label
        assert "__torchlens_body__" in handle.keys()


def test_every_payload_carries_a_crc32_of_its_bytes(tmp_path):
    import zlib

    from safetensors import safe_open

    trace = tl.trace(SmallCnn().eval(), torch.randn(1, 3, 8, 8))
    path = tmp_path / "cnn.tlspec"
    trace.save(str(path))
    # The payload CRC-32 table: the last tensor, one uint32 per payload in file order.
    table_name = "__torchlens_payload_crc32__"
    data = path.read_bytes()
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    with safe_open(str(path), framework="pt") as handle:
        assert "payload_crc32" not in handle.metadata()
        payload_labels = set(handle.keys()) - {"__torchlens_body__", table_name}
        in_file_order = sorted(payload_labels, key=lambda label: header[label]["data_offsets"])
        table = handle.get_tensor(table_name)
        assert table.dtype == torch.uint32 and table.shape == (len(in_file_order),) and payload_labels
        for label, crc in zip(in_file_order, table.tolist()):
            assert zlib.crc32(bits(handle.get_tensor(label))) == crc, label


def test_a_selective_save_keeps_only_the_selected_values(tmp_path):
    trace = tl.trace(Mlp().eval(), torch.randn(2, 8), save=tl.func("relu"))
    assert [op.label for op in trace.saved_ops] == ["relu_1_3"]
    path = tmp_path / "relu.tlspec"
    trace.save(str(path))
    loaded = tl.load(str(path))
    assert [op.label for op in loaded.saved_ops] == ["relu_1_3"]
    assert len(loaded.ops) == len(trace.ops)


def test_a_file_without_payloads_opens_without_reading_its_ops(tmp_path):
    """Opening a metadata-only file reads the op records only when they are asked for: a large
    trace's records cross from the core one by one, the bulk of its load time before."""
    model, x = Loop(), torch.randn(2, 6)
    trace = tl.trace(model, x, save=False)
    path = tmp_path / "no-payloads.tlspec"
    trace.save(str(path))
    loaded = tl.load(str(path))
    assert loaded._ops is None
    assert len(loaded) == len(trace)
    assert loaded.labels == trace.labels
    assert [op.shape for op in loaded.ops] == [op.shape for op in trace.ops]
    assert [[parent.label for parent in op.parents] for op in loaded.ops] == [
        [parent.label for parent in op.parents] for op in trace.ops
    ]


def damaged_copies(path):
    data = path.read_bytes()
    header_length = int.from_bytes(data[:8], "little")
    yield "empty", b""
    yield "seven bytes", data[:7]
    yield "truncated header", data[: 8 + header_length // 2]
    yield "truncated body", data[: 8 + header_length + 16]
    yield "truncated payload", data[:-3]
    yield "header length beyond the file", (len(data) * 2).to_bytes(8, "little") + data[8:]
    corrupted = bytearray(data)
    corrupted[8 + header_length + 4] ^= 0xFF
    yield "corrupted body", bytes(corrupted)
    yield "random bytes", os.urandom(len(data))
    header = json.loads(data[8 : 8 + header_length])
    header["__metadata__"]["format_version"] = "99"
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    yield "future version", len(text).to_bytes(8, "little") + text + data[8 + header_length :]


def test_damaged_files_raise_typed_errors(tmp_path):
    trace = tl.trace(Mlp().eval(), torch.randn(2, 8))
    path = tmp_path / "good.tlspec"
    trace.save(str(path))
    for name, content in damaged_copies(path):
        damaged = tmp_path / "damaged.tlspec"
        damaged.write_bytes(content)
        with pytest.raises(tl.errors.TlspecFormatError) as caught:
            tl.load(str(damaged))
        assert caught.value.code.startswith(("tlspec_", "trace_")), (name, caught.value.code)
        assert caught.value.remedy, name
    assert tl.load(str(path)).labels == trace.labels


def test_a_failed_save_leaves_the_old_file_intact(tmp_path):
    trace = tl.trace(Mlp().eval(), torch.randn(2, 8))
    path = tmp_path / "keep.tlspec"
    trace.save(str(path))
    before = path.read_bytes()
    # Sabotage one payload so that writing fails midway.
    slot = next(iter(trace._payloads))
    trace._payloads[slot] = torch.zeros(1)
    with pytest.raises(tl.errors.TlspecFormatError):
        trace.save(str(path))
    assert path.read_bytes() == before
    assert [name for name in os.listdir(tmp_path) if name.endswith(".partial")] == []
