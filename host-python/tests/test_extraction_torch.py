"""tl.extract_dataset on torch with the local engine: the shards hold exactly what a
hand-written forward-hook loop collects, each shard is a plain safetensors file and a full
``.tlspec``, columns read lazily (only the shards a slice touches), a killed run leaves no
shard half-written under its final name, and a rerun finishes it without repeating a row."""

from __future__ import annotations

import functools
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib

import numpy as np
import pytest
import torch
import torchvision
from safetensors.numpy import load_file

import torchlens as tl
from conformance.models.torch import SumRows
from torchlens.errors import ExtractionError
from torchlens.extraction.progress import Progress

pytestmark = pytest.mark.torch

LAYER = "layer3"


def resnet() -> torch.nn.Module:
    torch.manual_seed(0)
    return torchvision.models.resnet18().eval()


def images(count: int, size: int = 32) -> torch.Tensor:
    return torch.randn(count, 3, size, size, generator=torch.Generator().manual_seed(1))


def hook_loop(model: torch.nn.Module, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The hand-written baseline: a forward hook on the layer, one forward per batch."""
    kept = []
    handle = getattr(model, LAYER).register_forward_hook(
        lambda _m, _i, out: kept.append(out.detach().clone())
    )
    try:
        with torch.no_grad():
            for start in range(0, len(x), batch_size):
                model(x[start : start + batch_size])
    finally:
        handle.remove()
    return torch.cat(kept)


def test_local_extraction_equals_a_forward_hook_loop(tmp_path):
    model, x = resnet(), images(160)
    ex = tl.extract_dataset(model, x, save=tl.module(LAYER), out=str(tmp_path / "act"), batch_size=64)
    expected = hook_loop(model, x, 64)
    assert ex.labels == ["relu_7_70:2"] and len(ex) == 160
    column = ex["relu_7_70:2"]
    assert column.shape == tuple(expected.shape) and column.dtype == "float32"
    assert torch.equal(column.to_backend(), expected)
    assert np.array_equal(column.numpy(), expected.numpy())
    index = ex.index
    assert [shard["rows"] for shard in index["shards"]] == [64, 64, 32]
    assert [shard["row_start"] for shard in index["shards"]] == [0, 64, 128]
    assert index["job"]["model"] == "object torchvision.models.resnet.ResNet"
    assert index["backend"] == "torch" and index["columns"]["relu_7_70:2"]["row_shape"] == [256, 2, 2]
    # Each shard is plain safetensors (the payload under the op's label) and a whole trace.
    for shard in index["shards"]:
        plain = load_file(str(tmp_path / "act" / shard["file"]))
        start = shard["row_start"]
        assert np.array_equal(plain["relu_7_70:2"], expected[start : start + shard["rows"]].numpy())
        trace = ex.shard_trace(shard["index"])
        assert torch.equal(trace["relu_7_70:2"].out, expected[start : start + shard["rows"]])
    tl.load_extraction(str(tmp_path / "act"), verify=True)


def test_columns_are_lazy_and_index_like_numpy(tmp_path):
    x = images(100)
    ex = tl.extract_dataset(resnet(), x, save=tl.module(LAYER), out=str(tmp_path / "act"), batch_size=16)
    full = ex["relu_7_70:2"].numpy()
    fresh = tl.load_extraction(str(tmp_path / "act"))
    column = fresh["relu_7_70:2"]
    part = column[40:60]  # rows 40..59 lie in shards 2 (32..47) and 3 (48..63)
    assert sorted(column._maps) == [2, 3]
    assert np.array_equal(part, full[40:60])
    assert np.array_equal(column[-1], full[-1])
    assert np.array_equal(column[[99, 0, 50]], full[[99, 0, 50]])
    assert np.array_equal(column[10:90:7, 3], full[10:90:7, 3])
    assert np.array_equal(column[5:5], full[5:5])
    assert np.array_equal(np.asarray(column), full)
    assert isinstance(column[:1], np.ndarray)
    with pytest.raises(IndexError):
        column[100]
    with pytest.raises(KeyError):
        fresh["relu_1_1"]


def test_a_dataloader_of_pairs_with_inputs(tmp_path):
    x, y = images(48), torch.arange(48)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    model = resnet()
    ex = tl.extract_dataset(
        model, loader, save=tl.module(LAYER), out=str(tmp_path / "act"), inputs=lambda batch: batch[0]
    )
    assert torch.equal(ex["relu_7_70:2"].to_backend(), hook_loop(model, x, 16))


#: The batch the child's data source never hands over: the extraction writes each batch's shard
#: before it reads the next, so exactly this many shards are whole when the child is killed.
BLOCKED_BATCH = 5


def run_in_subprocess(out: str, marker: str) -> subprocess.Popen:
    """The extraction in its own process, whose data source creates ``marker`` and then blocks
    instead of yielding batch ``BLOCKED_BATCH``: the child is killed at a known point, not after a
    while."""
    code = textwrap.dedent(
        f"""
        import threading, torch, torchvision, torchlens as tl
        torch.manual_seed(0)
        model = torchvision.models.resnet18().eval()
        x = torch.randn(160, 3, 32, 32, generator=torch.Generator().manual_seed(1))
        def data():
            for batch, start in enumerate(range(0, 160, 16)):
                if batch == {BLOCKED_BATCH}:
                    open({marker!r}, "w").close()
                    threading.Event().wait()
                yield x[start : start + 16]
        tl.extract_dataset(model, data(), save=tl.module("layer3"), out={out!r}, batch_size=16)
        """
    )
    return subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))


def shard_files(out: str) -> list:
    return sorted(name for name in os.listdir(out) if name.startswith("shard-"))


def test_a_killed_run_resumes_without_repeating_a_row(tmp_path):
    out, marker = str(tmp_path / "act"), str(tmp_path / "blocked")
    process = run_in_subprocess(out, marker)
    # Waits for the marker, or for the child to end (a failure the assertions below report).
    while not os.path.exists(marker) and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    found = shard_files(out) if os.path.isdir(out) else []
    assert len(found) == BLOCKED_BATCH, found
    assert not os.path.exists(os.path.join(out, "index.json"))
    # Every file under a final name is whole: plain safetensors reads it, and its payload's
    # CRC-32 is the one its manifest records.
    stamps = {}
    for name in found:
        assert load_file(os.path.join(out, name))["relu_7_70:2"].shape[0] == 16
        stamps[name] = os.stat(os.path.join(out, name)).st_mtime_ns
    with pytest.raises(ExtractionError) as missing:
        tl.load_extraction(out)
    assert missing.value.code == "extraction_index_missing"

    x = images(160)
    resumed = tl.extract_dataset(resnet(), x, save=tl.module(LAYER), out=out, batch_size=16)
    for name, stamp in stamps.items():  # the finished shards were kept, not traced again
        assert os.stat(os.path.join(out, name)).st_mtime_ns == stamp
    assert not [name for name in os.listdir(out) if name.endswith(".partial")]
    assert [shard["row_start"] for shard in resumed.index["shards"]] == list(range(0, 160, 16))
    # Every row exactly once: each shard's recorded CRC-32 is that of the baseline's rows.
    expected = hook_loop(resnet(), x, 16).numpy()
    for shard in resumed.index["shards"]:
        rows = expected[shard["row_start"] : shard["row_start"] + 16]
        assert shard["crc32"]["relu_7_70:2"] == zlib.crc32(rows.tobytes())
    assert np.array_equal(resumed["relu_7_70:2"].numpy(), expected)


def test_a_rerun_refuses_other_data_and_other_jobs(tmp_path):
    out = str(tmp_path / "act")
    tl.extract_dataset(resnet(), images(32), save=tl.module(LAYER), out=out, batch_size=16)
    with pytest.raises(ExtractionError) as changed:
        tl.extract_dataset(resnet(), images(32) + 1, save=tl.module(LAYER), out=out, batch_size=16)
    assert changed.value.code == "extraction_resume_data_changed"
    with pytest.raises(ExtractionError) as other:
        tl.extract_dataset(resnet(), images(32), save=tl.module("layer2"), out=out, batch_size=16)
    assert other.value.code == "extraction_out_other_job"


def test_bad_arguments_are_refused_before_anything_runs(tmp_path):
    model, x = resnet(), images(8)
    cases = [
        (dict(save=None), "extraction_selector_missing"),
        (dict(save=tl.module(LAYER), batch_size=0), "extraction_batch_size_invalid"),
        (dict(save=tl.module(LAYER), engine="spark"), "extraction_engine_unknown"),
    ]
    for kwargs, code in cases:
        with pytest.raises(ExtractionError) as error:
            tl.extract_dataset(model, x, out=str(tmp_path / code), **kwargs)
        assert error.value.code == code and error.value.remedy
        assert not os.path.exists(tmp_path / code)
    with pytest.raises(ExtractionError) as error:
        tl.extract_dataset(model, 3, save=tl.module(LAYER), out=str(tmp_path / "int"))
    assert error.value.code == "extraction_data_invalid"
    # A selected op without the batch's rows (the pooled features summed over the batch).
    with pytest.raises(ExtractionError) as error:
        tl.extract_dataset(SumRows(), x, save=tl.func("sum"), out=str(tmp_path / "sum"), batch_size=4)
    assert error.value.code == "extraction_column_not_rows"
    assert not [name for name in os.listdir(tmp_path / "sum") if name.startswith("shard-")]
    # A job that failed before its first shard leaves nothing to protect: a corrected one runs.
    fixed = tl.extract_dataset(SumRows(), x, save=tl.func("relu"), out=str(tmp_path / "sum"), batch_size=4)
    assert np.array_equal(fixed["relu_1_2"].numpy(), torch.relu(x).numpy())


def test_progress_line_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    meter = Progress(100, None, terminal)
    meter.advance(50)
    meter.close()
    text = terminal.getvalue()
    assert "50/100 rows (50%)" in text and "rows/s" in text and "ETA" in text
    log = io.StringIO()
    meter = Progress(100, None, log)
    meter.advance(50)
    meter.close()
    assert log.getvalue() == ""


def test_factories_are_told_from_models():
    from torchlens.extraction.model_source import model_source

    assert model_source(resnet).factory is resnet
    assert model_source(resnet).description == f"factory {__name__}.resnet"
    assert model_source(functools.partial(images, 4)).factory is not None
    assert model_source(images).factory is None  # takes its inputs: a model (a function)

    class Builder:
        def __call__(self) -> torch.nn.Module:
            return SumRows()

    marked = model_source(tl.extraction.ModelFactory(Builder()))
    assert isinstance(marked.build(), SumRows)
    module = model_source(SumRows())
    assert module.factory is None and module.description == "object conformance.models.torch.SumRows"
