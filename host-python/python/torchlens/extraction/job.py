"""One extraction job as both engines run it: the output folder, the selector, the batches
and the rule for a shard a rerun finds (kept only if it was made from the same batch)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..errors import ExtractionError
from .batches import input_crc32, iterate_batches, model_inputs
from .shards import ShardRecord, read_shard, shard_name


@dataclass
class Job:
    """What an engine needs to run a job (picklable: the Ray engine ships it to its actors)."""

    out: str
    selector: Any
    batch_size: int
    backend: Optional[str]
    inputs: Optional[Callable[[Any], Any]]
    description: Dict[str, Any]


@dataclass
class Batch:
    """One batch of the job: its shard number, the model's inputs and their CRC-32."""

    index: int
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    digest: int


def batches(job: Job, data: Any) -> Iterator[Batch]:
    """The job's batches, numbered in data order."""
    for index, batch in enumerate(iterate_batches(data, job.batch_size)):
        args, kwargs = model_inputs(batch, job.inputs)
        yield Batch(index, args, kwargs, input_crc32(args, kwargs))


def finished_shard(job: Job, batch: Batch) -> Optional[ShardRecord]:
    """The shard of ``batch`` if a previous run finished it, else None. A shard made from other
    inputs is refused: the data changed between runs, and mixing them would be silent."""
    if not os.path.exists(os.path.join(job.out, shard_name(batch.index))):
        return None
    record = read_shard(job.out, batch.index)
    if record.input_crc32 != batch.digest:
        raise ExtractionError(
            f"{job.out}/{record.file} was made from other inputs than batch {batch.index} of this data",
            "extraction_resume_data_changed",
            "rerun with the data of the interrupted run (same order), or use a new out= folder",
        )
    return record


def check_complete(records: List[ShardRecord]) -> None:
    """Every batch has exactly one shard, in order (an engine bug otherwise)."""
    for position, record in enumerate(records):
        if record.index != position:
            raise ExtractionError(
                f"shard {position} is missing or repeated (found shard {record.index} in its place)",
                "extraction_shards_incomplete",
                "rerun with the same out= to finish the job; report a bug if it persists",
            )
