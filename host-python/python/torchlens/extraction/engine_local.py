"""The local engine: one process, one batch at a time. Memory holds one batch's trace: each is
written as its shard (and released) before the next batch is read."""

from __future__ import annotations

from typing import Any, List

from .job import Job, batches, finished_shard
from .model_source import ModelSource
from .progress import Progress
from .shards import ShardRecord, extract_shard


def run_local(job: Job, source: ModelSource, data: Any, progress: Progress) -> List[ShardRecord]:
    """Runs the job here; returns the shard records in row order. Finished shards are skipped
    (their batches are still read, to keep the numbering); the model is built only if a batch
    remains to trace."""
    records: List[ShardRecord] = []
    model = None
    for batch in batches(job, data):
        record = finished_shard(job, batch)
        if record is not None:
            records.append(record)
            progress.advance(record.rows, skipped=True)
            continue
        if model is None:
            model = source.build()
        record = extract_shard(
            model, batch.args, batch.kwargs, job.selector, job.backend, job.out, batch.index, batch.digest
        )
        records.append(record)
        progress.advance(record.rows)
    return records
