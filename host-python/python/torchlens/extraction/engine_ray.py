"""The Ray engine (``pip install 'torchlens[ray]'``): Ray Data maps the batches over a pool of
actors, each owning one model (built by the factory on its worker, or unpickled there once).
Each actor traces its batches and writes their shards with the local engine's code, so a shard
is the same file whichever engine or worker made it; the driver writes the index.

A batch whose worker dies is retried by Ray on a restarted actor (Ray Data's actor pools
restart actors and retry their tasks without bound by default); its shard is written under its
final name only once complete (temporary file and rename), so a retry rewrites the same name
and a row is never written twice.

The driver reads the data in order and puts each remaining batch in Ray's object store (which
spills to disk when full); a ``ray.data.Dataset`` is read there the same way, in batches of
``batch_size`` rows, so the shard numbering is the data order on both engines."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from .. import errors
from ..errors import ExtractionError, TorchLensError
from .job import Job, batches, finished_shard
from .model_source import ModelSource
from .progress import Progress
from .shards import ShardRecord, extract_shard, read_shard


class _ShardWriter:
    """A Ray Data actor: one model, traced on each batch it is handed."""

    def __init__(self, source: ModelSource, job: Job, inputs: Dict[int, Any]) -> None:
        self.model = source.build()
        self.job = job
        #: Batch number -> object reference of its ``(args, kwargs)`` (the rows stay in the
        #: object store until an actor asks for its batch).
        self.inputs = inputs

    def __call__(self, items: Dict[str, Any]) -> Dict[str, Any]:
        import ray  # lazy: ray is an optional dependency (torchlens[ray]), imported in the worker

        job = self.job
        failures = []
        for index, digest in zip(items["index"], items["digest"]):
            args, kwargs = ray.get(self.inputs[int(index)])
            try:
                extract_shard(
                    self.model, args, kwargs, job.selector, job.backend, job.out, int(index), int(digest)
                )
                failures.append("")
            except TorchLensError as error:
                # Ray hands the driver a task's exception as text; send ours as data so the
                # driver raises it with its code and remedy (and Ray does not retry it).
                failures.append(json.dumps([type(error).__name__, error.message, error.code, error.remedy]))
        return {"index": items["index"], "error": failures}


def run_ray(
    job: Job, source: ModelSource, data: Any, progress: Progress, actors: Optional[int] = None
) -> List[ShardRecord]:
    """Runs the job on the Ray cluster this process is connected to (``ray.init()`` first, or a
    local one is started); returns the shard records in row order."""
    try:
        # lazy: ray is an optional dependency (torchlens[ray]); importing torchlens must not import it
        import ray
        import ray.data
    except ImportError as error:
        raise ExtractionError(
            "engine='ray' needs Ray Data, which is not installed",
            "extraction_ray_missing",
            "pip install 'torchlens[ray]'",
        ) from error
    if not ray.is_initialized():
        ray.init()
    records: Dict[int, ShardRecord] = {}
    pending = []
    inputs = {}
    for batch in batches(job, data):
        record = finished_shard(job, batch)
        if record is not None:
            records[batch.index] = record
            progress.advance(record.rows, skipped=True)
            continue
        pending.append({"index": batch.index, "digest": batch.digest})
        inputs[batch.index] = ray.put((batch.args, batch.kwargs))
    total = len(records) + len(pending)
    if pending:
        if actors is None:
            actors = max(1, min(len(pending), int(ray.cluster_resources().get("CPU", 1))))
        context = ray.data.DataContext.get_current()
        saved_bars = context.enable_progress_bars
        context.enable_progress_bars = False  # the job draws its own line
        try:
            mapped = ray.data.from_items(pending, override_num_blocks=len(pending)).map_batches(
                _ShardWriter,
                fn_constructor_args=(source, job, inputs),
                batch_size=1,
                # Ray Data restarts a dead actor and retries its batch (max_restarts and
                # max_task_retries default to unbounded for actor pools).
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_cpus=1,
            )
            for row in mapped.iter_rows():
                if row["error"]:
                    raise _rebuilt_error(row["error"])
                index = int(row["index"])
                records[index] = read_shard(job.out, index)
                progress.advance(records[index].rows)
        finally:
            context.enable_progress_bars = saved_bars
    return [records[index] for index in range(total) if index in records]


def _rebuilt_error(text: str) -> Exception:
    """An actor's TorchLensError, rebuilt on the driver from ``[class, message, code, remedy]``."""
    name, message, code, remedy = json.loads(text)
    kind = getattr(errors, name, None)
    if isinstance(kind, type) and issubclass(kind, errors.TorchLensError):
        try:
            return kind(message, code, remedy)
        except TypeError:
            pass
    return errors.ExtractionError(message, code, remedy)
