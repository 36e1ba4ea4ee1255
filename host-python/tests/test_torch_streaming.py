"""Streaming saves on torch (``streaming=StreamingOptions(path=...)``): the values reach the file
while the forward runs, the trace reads them back from it, memory stays near one op's values,
and nothing is ever left under the final name by a forward that raises or a process that dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from peak_memory import peak_growth

import torchlens as tl
from conformance.models.torch import battery
from torchlens.adapter_kit.session import open_session_count
from torchlens.errors import BackendUnsupportedError, UnsupportedError

pytestmark = pytest.mark.torch


BATTERY = {name: (model, x) for name, model, x in battery()}


def stream(model, x, folder, **kwargs):
    path = os.path.join(folder, "run.tlspec")
    return tl.trace(model, x, streaming=tl.StreamingOptions(path=path), **kwargs), path


@pytest.mark.parametrize("name", sorted(BATTERY))
def test_a_streamed_trace_holds_the_same_values_as_an_in_memory_one(name, tmp_path):
    model, x = BATTERY[name]
    expected = tl.trace(model, x)
    streamed, path = stream(model, x, tmp_path)
    loaded = tl.load(path, verify=True)
    assert streamed.labels == expected.labels == loaded.labels
    for op in expected.ops:
        if op.out is None:
            assert streamed[op.label].out is None
            continue
        assert torch.equal(streamed[op.label].out, op.out), op.label
        assert torch.equal(loaded[op.label].out, op.out), op.label
    # Only the final file is left: the spool is gone.
    assert sorted(os.listdir(tmp_path)) == ["run.tlspec"]


def test_in_place_ops_stream_the_value_each_op_computed(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    expected = tl.trace(model, x)
    streamed, _ = stream(model, x, tmp_path)
    for op in expected.ops:
        if op.out is not None:
            assert torch.equal(streamed[op.label].out, op.out), op.label


def test_a_narrow_save_streams_only_the_selected_values(tmp_path):
    model, x = BATTERY["mlp"]
    streamed, path = stream(model, x, tmp_path, save=tl.func("relu"))
    loaded = tl.load(path)
    relus = [op.label for op in streamed.ops if op.func_name == "relu"]
    assert relus
    assert [op.label for op in loaded.saved_ops if op.kind != "input"] == relus
    assert [op.label for op in streamed.saved_ops] == [op.label for op in loaded.saved_ops]


def test_edits_and_early_stop_stream_what_flowed(tmp_path):
    model, x = BATTERY["mlp"]
    edited, path = stream(model, x, tmp_path, intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    for op in tl.load(path).ops:
        if op.func_name == "relu":
            assert not op.out.any()
    stopped, path = stream(model, x, tmp_path, stop_after=tl.func("relu"))
    assert stopped.is_stopped
    assert tl.load(path).labels == stopped.labels


def test_a_forward_that_raises_leaves_no_file_and_keeps_an_older_one(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())

    def fail(*_):
        raise RuntimeError("the model failed")

    _, path = stream(model, torch.ones(1, 3), tmp_path)
    before = open(path, "rb").read()
    model[1].register_forward_hook(fail)
    with pytest.raises(RuntimeError, match="the model failed"):
        stream(model, torch.ones(1, 3), tmp_path)
    assert os.listdir(tmp_path) == ["run.tlspec"]
    assert open(path, "rb").read() == before


KILLED = """
import os, sys, time, torch, torchlens as tl

ready, path = sys.argv[1], sys.argv[2]

class Stalls(torch.nn.Module):
    def forward(self, x):
        open(ready, "w").close()
        time.sleep(120)
        return x

model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(20)], Stalls())
tl.trace(model, torch.randn(512, 64), streaming=tl.StreamingOptions(path=path))
"""


def test_killing_the_process_mid_stream_leaves_nothing_under_the_final_name(tmp_path):
    ready, path = str(tmp_path / "ready"), str(tmp_path / "run.tlspec")
    child = subprocess.Popen([sys.executable, "-c", KILLED, ready, path])
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(ready):
            assert child.poll() is None, "the child ended before the stall"
            assert time.monotonic() < deadline, "the child never reached the stall"
            time.sleep(0.05)
        spools = [name for name in os.listdir(tmp_path) if name.endswith(".spool")]
        # Mid-stream: twenty layers' values are already on disk, in the spool.
        assert len(spools) == 1
        assert os.path.getsize(tmp_path / spools[0]) >= 20 * 512 * 64 * 4
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert not os.path.exists(path)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tlspec")]


def test_streaming_keeps_peak_memory_near_one_value(tmp_path):
    saved_all, growth_all = peak_growth("save=None")
    path = str(tmp_path / "deep.tlspec")
    saved_streamed, growth_streamed = peak_growth(f"streaming=tl.StreamingOptions(path={path!r})")
    assert saved_streamed == saved_all > 800
    # ~200 MiB kept in memory by a full trace, against one value at a time when streamed.
    assert growth_all > 150 * 2**20, growth_all
    assert growth_streamed < growth_all / 4, (growth_streamed, growth_all)
    assert len(tl.load(path).saved_ops) == saved_all


def test_streaming_options_are_checked_before_the_model_runs(tmp_path):
    with pytest.raises(UnsupportedError) as caught:
        tl.StreamingOptions()
    assert caught.value.code == "streaming_path_invalid"
    with pytest.raises(UnsupportedError) as caught:
        tl.StreamingOptions(path="a.tlspec", bundle_path="b.tlspec")
    assert caught.value.code == "streaming_path_invalid"
    # The reference's spelling works the same.
    model, x = BATTERY["mlp"]
    path = str(tmp_path / "bundle.tlspec")
    tl.trace(model, x, streaming=tl.StreamingOptions(bundle_path=path))
    assert tl.load(path).labels == tl.trace(model, x).labels
    with pytest.raises(UnsupportedError) as caught:
        tl.trace(model, x, streaming=str(tmp_path / "x.tlspec"))
    assert caught.value.code == "streaming_path_invalid"
    assert os.listdir(tmp_path) == ["bundle.tlspec"]
    # A folder that does not exist: refused before the model runs, no core session left open.
    with pytest.raises(UnsupportedError) as caught:
        tl.trace(model, x, streaming=tl.StreamingOptions(path=str(tmp_path / "absent" / "x.tlspec")))
    assert caught.value.code == "streaming_path_invalid"
    assert open_session_count() == 0


def test_a_backend_without_streaming_refuses_it(tmp_path):
    jax = pytest.importorskip("jax")

    def fn(params, x):
        return jax.numpy.tanh(x @ params)

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            fn,
            (jax.numpy.ones((2, 2)), jax.numpy.ones((1, 2))),
            backend="jax",
            streaming=tl.StreamingOptions(path=str(tmp_path / "j.tlspec")),
        )
    assert caught.value.code == "streaming_unsupported"
    assert os.listdir(tmp_path) == []
