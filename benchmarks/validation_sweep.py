"""Replay validation over every torchvision classification model (random weights, eval mode,
small inputs): each trace's output must equal the model's, and validation must never call a
correct trace ``failed``. Prints one line per model and the totals (states, unverified ops and
their reasons, validation time in total and per op).

    python benchmarks/validation_sweep.py [--only NAME ...] [--json PATH]

Run by ``make sweep`` (not part of ``make test``; the five representative models are, in
host-python/tests/test_validation_real_models.py).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Dict, List

import torch
import torchvision

import torchlens as tl

#: Input sides for models that need more than the default (ViT's position embedding is fixed,
#: MaxViT's windows need 224;
#: Inception's stem pools down to nothing below 75).
SIDES: Dict[str, int] = {"inception_v3": 96, "googlenet": 64, "maxvit_t": 224}
DEFAULT_SIDE = 64


def side_of(name: str) -> int:
    if name.startswith("vit_"):
        return 224
    return SIDES.get(name, DEFAULT_SIDE)


def sweep_one(name: str) -> dict:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name).eval()
    side = side_of(name)
    x = torch.randn(1, 3, side, side)
    with torch.no_grad():
        expected = model(x)
    trace = tl.trace(model, x)
    output_equal = bool(torch.allclose(trace.outputs[0].out, expected, atol=1e-5, rtol=1e-4))
    started = time.perf_counter()
    status = trace.validation_replay_status
    seconds = time.perf_counter() - started
    return {
        "model": name,
        "side": side,
        "ops": len(trace),
        "output_equal": output_equal,
        "state": status.state,
        "reason": status.reason,
        "first_failed_op": status.first_failed_op,
        "replayed": status.replayed,
        # getattr: the script also times releases whose status lacks these counts.
        "perturbation_proven": getattr(status, "perturbation_proven", None),
        "value_independent": getattr(status, "value_independent", None),
        "unverified_ops": getattr(status, "unverified_ops", []),
        "validation_seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="model names (default: every classification model)")
    parser.add_argument("--json", help="also write the per-model results here")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    names: List[str] = arguments.only or sorted(torchvision.models.list_models(module=torchvision.models))
    results = []
    for name in names:
        try:
            result = sweep_one(name)
        except Exception as error:  # a model that cannot even be traced is reported, not hidden
            result = {"model": name, "error": f"{type(error).__name__}: {error}"}
        results.append(result)
        if "error" in result:
            print(f"{name:28s} ERROR {result['error']}", flush=True)
            continue
        unverified = ", ".join(f"{label} ({reason})" for label, reason in result["unverified_ops"][:3])
        print(
            f"{name:28s} {result['ops']:5d} ops  output {'ok' if result['output_equal'] else 'DIFFERS'}  "
            f"{result['state']:10s} {result['validation_seconds']:6.2f} s"
            + (
                f"  failed at {result['first_failed_op']} ({result['reason']})"
                if result["state"] == "failed"
                else ""
            )
            + (f"  unverified: {unverified}" if unverified else ""),
            flush=True,
        )
    traced = [result for result in results if "error" not in result]
    states = Counter(result["state"] for result in traced)
    reasons = Counter(reason for result in traced for _, reason in result["unverified_ops"])
    ops = sum(result["ops"] for result in traced)
    seconds = sum(result["validation_seconds"] for result in traced)
    print()
    equal = sum(result["output_equal"] for result in traced)
    print(f"models: {len(results)}, traced: {len(traced)}, outputs equal: {equal}")
    print("states: " + ", ".join(f"{state} {count}" for state, count in sorted(states.items())))
    print(
        "unverified reasons: "
        + (", ".join(f"{reason} {count}" for reason, count in reasons.items()) or "none")
    )
    print(
        f"validation time: {seconds:.1f} s total, {1e6 * seconds / max(ops, 1):.0f} µs per op over {ops} ops"
    )
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
