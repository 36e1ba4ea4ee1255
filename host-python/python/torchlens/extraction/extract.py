"""``tl.extract_dataset``: the door of a job. Checks the arguments, claims the output folder,
runs an engine and writes the index last."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from ..argument_checks import backend_name, optional_instance_of, path_argument, short_repr
from ..errors import ExtractionError
from ..file_errors import created_folder
from ..selectors import as_selector
from .batches import total_rows
from .engine_local import run_local
from .engine_ray import run_ray
from .index import build_index, claim_out, job_description, write_index
from .job import Job, check_complete
from .lazy import Extraction, load_extraction
from .model_source import model_source
from .progress import Progress

ENGINES = ("local", "ray")


def extract_dataset(
    model_or_factory: Any,
    data: Any,
    save: Any,
    out: str = "activations/",
    batch_size: int = 32,
    backend: Optional[str] = None,
    engine: str = "local",
    *,
    inputs: Optional[Callable[[Any], Any]] = None,
    progress: Optional[bool] = None,
    ray_actors: Optional[int] = None,
) -> Extraction:
    """Traces every batch of ``data`` with ``save=`` (selective capture) and writes the selected
    ops' values to ``out``: one ``.tlspec`` shard per batch, then ``index.json``. Returns the
    result opened with :func:`load_extraction`.

    ``model_or_factory`` is a model (anything ``tl.trace`` takes), or a factory that builds it:
    a plain function or ``functools.partial`` with no required argument, or a
    :class:`ModelFactory` (the Ray engine builds one model per actor with it). ``data`` is an
    array of rows (cut into ``batch_size`` rows), a ``datasets.Dataset`` or ``ray.data.Dataset``
    (read ``batch_size`` rows at a time), or any iterable of batches, used as given (a torch
    ``DataLoader``). ``inputs``, when given, maps a batch to the model's inputs (``lambda b:
    b[0]`` for ``(x, y)`` batches); a tuple is positional inputs, a dict keyword inputs.

    ``engine="local"`` runs here, one batch at a time; ``engine="ray"`` (``pip install
    'torchlens[ray]'``) on the Ray cluster this process is connected to, ``ray_actors`` models
    at once (default: the cluster's CPUs). Both write the same shards and index for the same
    data order. Rerunning with the same ``out`` skips the shards already written (checking they
    were made from the same batches) and writes the rest. ``progress=None`` shows rows/s and the
    time left when stderr is a terminal. Torch modules run under ``torch.no_grad()``; put the
    model in eval mode first if it has dropout or batch norm.
    """
    if save is None or isinstance(save, bool):
        raise ExtractionError(
            f"tl.extract_dataset needs save= to choose the ops to keep, got {save!r}",
            "extraction_selector_missing",
            'pass a selector or a label, e.g. save=tl.module("layer3") or save="relu_1_3"',
        )
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ExtractionError(
            f"batch_size must be a positive integer, got {batch_size!r}",
            "extraction_batch_size_invalid",
            "pass batch_size=32 (or any positive integer)",
        )
    if engine not in ENGINES:
        raise ExtractionError(
            f"engine={engine!r} is not one of {', '.join(ENGINES)}",
            "extraction_engine_unknown",
            'pass engine="local" (default) or engine="ray"',
        )
    backend_name(backend)
    if inputs is not None and not callable(inputs):
        raise ExtractionError(
            f"inputs= must be a function from a batch to the model's inputs, got {short_repr(inputs)}",
            "argument_invalid",
            "pass inputs=lambda batch: batch[0], or leave it unset to pass each batch whole",
        )
    optional_instance_of(progress, bool, "progress", "True or False", "pass progress=False to hide it")
    optional_instance_of(
        ray_actors, int, "ray_actors", "a number of actors", "pass ray_actors=4, or leave it unset"
    )
    selector = as_selector(save)
    source = model_source(model_or_factory)
    out = created_folder(os.path.abspath(path_argument(out, "out", "activations/")))
    description = job_description(source.description, selector, batch_size, backend, inputs)
    claim_out(out, description)
    job = Job(out, selector, batch_size, backend, inputs, description)
    meter = Progress(total_rows(data), progress)
    try:
        if engine == "ray":
            records = run_ray(job, source, data, meter, ray_actors)
        else:
            records = run_local(job, source, data, meter)
    finally:
        meter.close()
    check_complete(records)
    write_index(out, build_index(description, records))
    return load_extraction(out)
