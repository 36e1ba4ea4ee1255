"""What reporting module calls costs a torch trace: brackets on the model's modules (what a
capture uses) against global forward hooks (what it used before), against a plain forward, in
turns in one process.

    python benchmarks/torch_module_calls.py [--repeats N]

Global hooks are forced by making ``module_brackets.can_bracket`` answer False, which is the
path a function root takes. Torch runs on one thread, as in the other benchmark scripts. The
trace's ops and module calls are the same either way (``test_torch_module_brackets.py``).
"""

from __future__ import annotations

import argparse
from typing import Callable, Dict

import torch
from measurement import interleaved
from torch_overhead import models as overhead_models

#: The workloads of ``torch_overhead.py`` this benchmark runs.
WORKLOADS = ("deep_mlp_50", "transformer_6", "resnet18")


def models():
    return [(name, model, x) for name, model, x in overhead_models() if name in WORKLOADS]


def module_calls(model: torch.nn.Module, x: torch.Tensor) -> int:
    """How many module calls one forward makes (counted by a global pre-hook, once)."""
    calls = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        model(x)
    finally:
        handle.remove()
    return len(calls)


def traced_with(brackets: bool, model: torch.nn.Module, x: torch.Tensor) -> Callable[[], object]:
    import torchlens as tl
    from torchlens.backends.torch import module_brackets

    bracketing = module_brackets.can_bracket

    def run() -> object:
        if brackets:
            return tl.trace(model, x)
        module_brackets.can_bracket = lambda modules: False
        try:
            return tl.trace(model, x)
        finally:
            module_brackets.can_bracket = bracketing

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | module calls | plain ms | global hooks × plain | brackets × plain | saved per call µs |")
    print("|---|---|---|---|---|---|")
    for name, model, x in models():
        with torch.no_grad():
            calls = module_calls(model, x)
            once = traced_with(True, model, x)
            once()
            block = max(1, int(0.05 / max(_seconds(once), 1e-6)))
            runs: Dict[str, Callable[[], object]] = {
                "plain": lambda model=model, x=x: model(x),
                "hooks": traced_with(False, model, x),
                "brackets": traced_with(True, model, x),
            }
            times = interleaved(runs, options.repeats, block)
        plain = times["plain"]
        saved = (times["hooks"] - times["brackets"]) / calls * 1e6
        print(
            f"| {name} | {calls} | {plain * 1e3:.2f} | {times['hooks'] / plain:.3f} | "
            f"{times['brackets'] / plain:.3f} | {saved:.1f} |"
        )


def _seconds(run: Callable[[], object]) -> float:
    import time

    start = time.perf_counter()
    run()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
