"""How much tl.trace costs on torch models, against a plain forward pass and (optionally) the
reference implementation, in the same run.

    python benchmarks/torch_overhead.py [--reference-python PATH] [--repeats N] [--json]

For each model: plain forward, tl.trace saving every op, tl.trace with a narrow ``save=``, and
the floor under any capture that saves every value (``torch_floor.py``), measured in turns (a
machine that slows for a while slows all four alike); the per-op overhead above the plain
forward and the ratio to it. ``fixed_cost`` is a one-op model: its
trace minus its forward is the fixed cost of a trace. The models in ``VARIED`` are also
timed on inputs that change shape every call ("new-events µs/op"): the core gives a trace whose
events equal the last capture's that capture's trace, so this is what a first trace costs.
With ``--reference-python``, the same models run under that interpreter's ``torchlens`` (the
reference, 2.36.1, whose default ``trace`` saves every op) and the figures print side by side.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Tuple

import checkout_root  # noqa: F401  (before the conformance import below: it puts the checkout on sys.path)
import torch
from measurement import interleaved, measure_in_reference_python

from conformance.models.torch import BenchmarkCnn, Chain, DeepMlp, OneOp, Transformer, relu_mlp_stack


def models():
    import torchvision

    torch.manual_seed(0)
    return [
        ("deep_mlp_50", DeepMlp().eval(), torch.randn(8, 64)),
        ("transformer_6", Transformer().eval(), torch.randint(0, 1000, (2, 32))),
        ("resnet18", torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 224, 224)),
        ("resnet18_b8", torchvision.models.resnet18(weights=None).eval(), torch.randn(8, 3, 224, 224)),
        ("fixed_cost", OneOp(), torch.randn(4)),
        ("mlp", relu_mlp_stack().eval(), torch.randn(32, 256)),
        ("small_cnn", BenchmarkCnn().eval(), torch.randn(8, 3, 32, 32)),
        ("chain_1000_ops", Chain(), torch.randn(4)),
    ]


#: Models also timed on inputs that change shape every call (``plain_varied``, ``full_varied``):
#: a trace of the same model on the same shapes sends the core the same events as the last one
#: and is given that trace (``core-wasm/src/build/repeat_cache.rs``); alternating two shapes
#: makes every trace's events new to the core, the cost of a first trace.
VARIED = ("deep_mlp_50", "transformer_6", "fixed_cost")


def alternating(call, x: torch.Tensor):
    """``call`` on ``x`` and on ``x`` with one more row, in turn."""
    inputs = (x, torch.cat([x, x[:1]]))
    turn = [0]

    def run():
        turn[0] ^= 1
        return call(inputs[turn[0]])

    return run


def runs_for(call, repeats: int, budget: float = 2.0) -> Tuple[int, int]:
    """(turns, calls per turn) for one model: at least ``repeats`` turns; a model that takes
    microseconds runs in blocks of about 20 ms (so the work a trace leaves behind, such as a
    garbage collection, lands in its own block) and in more turns, up to about ``budget``
    seconds, so its medians settle too. A call's time is the fastest of three: one slow call
    (a collection, a first-use cache filling) must not shrink the blocks to a call or two, in
    which the first call after another run's block, with that run's data in the caches, weighs
    as much as all the others."""
    fastest = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        call()
        fastest = min(fastest, time.perf_counter() - start)
    once = max(fastest, 1e-6)
    block = max(1, int(0.02 / once))
    turns = max(repeats, min(101, int(budget / (once * block))))
    return turns, block


def measure_ours(repeats: int) -> dict:
    import warnings

    from torch_floor import floor_run

    import torchlens as tl

    # The narrow selector matches nothing on models without relu or linear (fixed_cost).
    warnings.filterwarnings("ignore", category=tl.errors.SelectorMatchedNothingWarning)

    results = {}
    for name, model, x in models():
        with torch.no_grad():
            trace = tl.trace(model, x)
            runs = {
                "plain": lambda model=model, x=x: model(x),
                "full": lambda model=model, x=x: tl.trace(model, x),
                "narrow": lambda model=model, x=x: tl.trace(
                    model, x, save=tl.func("relu") | tl.func("linear")
                ),
                "floor": floor_run(model, x),
            }
            if name in VARIED:
                runs["plain_varied"] = alternating(model, x)
                runs["full_varied"] = alternating(lambda x, model=model: tl.trace(model, x), x)
            turns, block = runs_for(runs["full"], repeats)
            timings = interleaved(runs, turns, block)
        results[name] = {"ops": len(trace), **timings}
    return results


def measure_reference(repeats: int) -> dict:
    import torchlens as reference

    results = {}
    for name, model, x in models():
        with torch.no_grad():
            ops = len(reference.trace(model, x).ops)
            runs = {
                "plain": lambda model=model, x=x: model(x),
                "full": lambda model=model, x=x: reference.trace(model, x),
            }
            # The reference is slow per op: fewer timed runs keep a comparison within minutes.
            turns, block = runs_for(runs["full"], repeats, budget=1.0)
            timings = interleaved(runs, max(3, turns // 3), block)
        results[name] = {"ops": ops, **timings}
    return results


def report(ours: dict, reference: dict) -> None:
    header = (
        f"{'model':<18}{'ops':>6}{'plain ms':>10}{'full ms':>10}{'x plain':>9}{'µs/op':>8}{'narrow ms':>11}"
        f"{'floor x':>9}{'new-events µs/op':>18}"
    )
    if reference:
        header += f"{'ref ops':>9}{'ref ms':>10}{'ref x':>8}{'ref µs/op':>11}{'speed-up/op':>13}"
    print(header)
    for name, row in ours.items():
        per_op = (row["full"] - row["plain"]) / row["ops"] * 1e6
        line = (
            f"{name:<18}{row['ops']:>6}{row['plain'] * 1e3:>10.2f}{row['full'] * 1e3:>10.2f}"
            f"{row['full'] / row['plain']:>9.2f}{per_op:>8.1f}{row['narrow'] * 1e3:>11.2f}"
            f"{row['floor'] / row['plain']:>9.2f}"
        )
        varied = ""
        if "full_varied" in row:
            varied = f"{(row['full_varied'] - row['plain_varied']) / row['ops'] * 1e6:.1f}"
        line += f"{varied:>18}"
        if name in reference:
            ref = reference[name]
            ref_per_op = (ref["full"] - ref["plain"]) / ref["ops"] * 1e6
            line += (
                f"{ref['ops']:>9}{ref['full'] * 1e3:>10.1f}{ref['full'] / ref['plain']:>8.1f}"
                f"{ref_per_op:>11.1f}{ref_per_op / max(per_op, 1e-9):>13.1f}"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    parser.add_argument(
        "--json", action="store_true", help="print ours and the reference's as one JSON object"
    )
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    if arguments.mode == "ours":
        print(json.dumps(measure_ours(arguments.repeats)))
        return
    if arguments.mode == "reference":
        print(json.dumps(measure_reference(arguments.repeats)))
        return
    reference = {}
    if arguments.reference_python:
        reference = measure_in_reference_python(arguments.reference_python, __file__, arguments.repeats)
    ours = measure_ours(arguments.repeats)
    if arguments.json:
        print(json.dumps({"framework": f"torch {torch.__version__}", "ours": ours, "reference": reference}))
        return
    print(f"torch {torch.__version__}, 1 thread, median of at least {arguments.repeats} runs in turns")
    report(ours, reference)


if __name__ == "__main__":
    main()
