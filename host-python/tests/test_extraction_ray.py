"""tl.extract_dataset with engine="ray" on a real local Ray cluster (two CPUs, two actors):
the same shards' payloads and the same index bytes as the local engine, and a worker killed
mid-job (SIGKILL inside a forward) costs a retry, never a lost or repeated row."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest
import ray
import torch
import torchvision
from safetensors.numpy import load_file

import torchlens as tl
from conformance.models.torch import SumRows
from torchlens.errors import ExtractionError

pytestmark = [pytest.mark.ray, pytest.mark.torch]

ROWS, BATCH = 32, 8
LABEL = "relu_7_70:2"


def resnet() -> torch.nn.Module:
    """The factory: each actor builds its own model (same seed, same weights)."""
    torch.manual_seed(0)
    return torchvision.models.resnet18().eval()


def images() -> torch.Tensor:
    return torch.randn(ROWS, 3, 32, 32, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def cluster():
    # The factories below live in this test module, which Ray's workers cannot import: ship
    # them by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("local") / "act")
    return tl.extract_dataset(resnet, images(), save=tl.module("layer3"), out=out, batch_size=BATCH)


def payloads(out: str, index: dict) -> list:
    return [load_file(os.path.join(out, shard["file"]))[LABEL].tobytes() for shard in index["shards"]]


def test_ray_engine_writes_what_the_local_engine_writes(cluster, local_run, tmp_path):
    out = str(tmp_path / "act")
    ex = tl.extract_dataset(
        resnet, images(), save=tl.module("layer3"), out=out, batch_size=BATCH, engine="ray"
    )
    with open(os.path.join(out, "index.json"), "rb") as ray_index:
        with open(os.path.join(local_run.path, "index.json"), "rb") as local_index:
            assert ray_index.read() == local_index.read()
    assert payloads(out, ex.index) == payloads(local_run.path, local_run.index)
    assert len(ex.index["shards"]) == ROWS // BATCH


def killing_resnet(marker: str, on_call: int):
    """A factory whose model's forward kills its own worker process (SIGKILL) on the actor's
    ``on_call``-th batch, once per job: the first worker to create ``marker`` dies."""

    def build() -> torch.nn.Module:
        model = resnet()
        calls = []

        def die_once(_module, _args):
            calls.append(1)
            if len(calls) != on_call:
                return
            try:
                handle = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(handle, str(os.getpid()).encode())
            os.close(handle)
            os.kill(os.getpid(), signal.SIGKILL)

        model.register_forward_pre_hook(die_once)
        return model

    return build


def test_a_killed_worker_costs_a_retry_not_a_row(cluster, local_run, tmp_path):
    marker = str(tmp_path / "killed")
    out = str(tmp_path / "act")
    ex = tl.extract_dataset(
        killing_resnet(marker, 2), images(), save=tl.module("layer3"), out=out, batch_size=BATCH, engine="ray"
    )
    assert os.path.exists(marker)  # a worker did die mid-job
    assert int(open(marker).read()) != os.getpid()
    shards = ex.index["shards"]
    assert [shard["index"] for shard in shards] == list(range(ROWS // BATCH))
    assert [shard["row_start"] for shard in shards] == list(range(0, ROWS, BATCH))
    assert sorted(name for name in os.listdir(out) if name.endswith(".tlspec")) == [s["file"] for s in shards]
    assert ex.index["shards"] == local_run.index["shards"]
    assert np.array_equal(ex[LABEL].numpy(), local_run[LABEL].numpy())


def test_a_ray_dataset_as_data_numbers_rows_like_an_array(cluster, local_run, tmp_path):
    dataset = ray.data.from_numpy(images().numpy())
    ex = tl.extract_dataset(
        resnet,
        dataset,
        save=tl.module("layer3"),
        out=str(tmp_path / "act"),
        batch_size=BATCH,
        inputs=lambda batch: torch.tensor(batch["data"]),
    )
    assert ex.index["shards"] == local_run.index["shards"]
    assert payloads(ex.path, ex.index) == payloads(local_run.path, local_run.index)


def test_an_actors_refusal_reaches_the_driver_with_its_code(cluster, tmp_path):
    with pytest.raises(ExtractionError) as error:
        tl.extract_dataset(
            SumRows(),
            torch.randn(8, 4),
            save=tl.func("sum"),
            out=str(tmp_path / "act"),
            batch_size=4,
            engine="ray",
            ray_actors=1,
        )
    assert error.value.code == "extraction_column_not_rows" and error.value.remedy
