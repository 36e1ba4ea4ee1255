"""tl.extract_dataset (local engine) against a hand-written forward-hook loop: rows per second
of each, and the ratio of their times.

    python benchmarks/extraction.py [--images 2048] [--batch-size 64] [--image-size 224]
                                    [--save TEXT] [--out DIR]

torchvision's resnet18 (random weights, eval), ``--images`` random images in batches of
``--batch-size``, one selected layer (default ``tl.module("layer3")``, whose output the hook
loop collects with a forward hook on ``model.layer3``). The hook loop keeps its values in
memory; the extraction writes them as ``.tlspec`` shards and an index to ``--out`` (a
temporary folder by default), so its time includes the disk writes.

The two run interleaved, batch by batch, so load from other processes on a shared machine lands
on both alike: the extraction reads its batches from a generator that first runs the hook
loop's forward on the same batch (timed on its own); the extraction's time is its wall time
less the time spent inside that generator. At the end the extracted column is checked equal to
the hook loop's values. The last line of output is the JSON measurement.

Target: the extraction takes at most 1.2x the hook loop's time.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Iterator, List

import torch
import torchvision

import torchlens as tl


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--save", default='tl.module("layer3")', help="the selector, as Python")
    parser.add_argument("--layer", default="layer3", help="the module the hook loop hooks")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    arguments = parser.parse_args()

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    images = torch.randn(arguments.images, 3, arguments.image_size, arguments.image_size)
    selector = eval(arguments.save, {"tl": tl})  # noqa: S307 (a command-line selector)

    hooked: List[torch.Tensor] = []
    # The hook collects only during the hook loop's own forwards, not the extraction's.
    collecting = [False]

    def hook(_module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
        if collecting[0]:
            hooked.append(output.detach().clone())

    getattr(model, arguments.layer).register_forward_hook(hook)
    hook_seconds = 0.0
    generator_seconds = 0.0

    def interleaved() -> Iterator[torch.Tensor]:
        """The extraction's data; each batch first goes through the hook loop (timed apart)."""
        nonlocal hook_seconds, generator_seconds
        for start in range(0, arguments.images, arguments.batch_size):
            entered = time.perf_counter()
            batch = images[start : start + arguments.batch_size]
            collecting[0] = True
            forward_started = time.perf_counter()
            with torch.no_grad():
                model(batch)
            hook_seconds += time.perf_counter() - forward_started
            collecting[0] = False
            generator_seconds += time.perf_counter() - entered
            yield batch

    # One warm-up of each (the first forward allocates; the first trace compiles the core).
    warm = images[: arguments.batch_size]
    with torch.no_grad():
        model(warm)
        tl.trace(model, warm, save=selector)

    with tempfile.TemporaryDirectory() as scratch:
        out = arguments.out or os.path.join(scratch, "activations")
        started = time.perf_counter()
        extraction = tl.extract_dataset(
            model, interleaved(), save=selector, out=out, batch_size=arguments.batch_size, progress=False
        )
        extraction_seconds = time.perf_counter() - started - generator_seconds
        (label,) = extraction.labels
        equal = bool(torch.equal(extraction[label].to_backend(), torch.cat(hooked)))
        shard_bytes = sum(
            os.path.getsize(os.path.join(extraction.path, shard["file"]))
            for shard in extraction.index["shards"]
        )

    rows = arguments.images
    result = {
        "images": rows,
        "batch_size": arguments.batch_size,
        "image_size": arguments.image_size,
        "label": label,
        "equal_to_hook_loop": equal,
        "hook_loop_seconds": round(hook_seconds, 3),
        "extraction_seconds": round(extraction_seconds, 3),
        "hook_loop_rows_per_second": round(rows / hook_seconds, 2),
        "extraction_rows_per_second": round(rows / extraction_seconds, 2),
        "ratio": round(extraction_seconds / hook_seconds, 3),
        "shard_megabytes": round(shard_bytes / 1e6, 1),
        "torch_threads": torch.get_num_threads(),
    }
    size = arguments.image_size
    hook_rate, extraction_rate = result["hook_loop_rows_per_second"], result["extraction_rows_per_second"]
    print(
        f"resnet18, {rows} images {size}x{size}, batch {arguments.batch_size}, "
        f"save={arguments.save} ({label})\n"
        f"  hook loop : {hook_seconds:8.2f} s  {hook_rate:8.1f} rows/s\n"
        f"  extraction: {extraction_seconds:8.2f} s  {extraction_rate:8.1f} rows/s"
        f"  ({shard_bytes / 1e6:.0f} MB of shards)\n"
        f"  ratio {result['ratio']:.3f}x (target <= 1.2x); values equal: {equal}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
