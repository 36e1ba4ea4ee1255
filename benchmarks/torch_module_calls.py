"""What reporting module calls costs a torch trace: brackets on the model's modules (what a
capture uses; on the native host the native bracket) against the Python bracket and against
global forward hooks (what it used before), against a plain forward, in turns in one process.

    python benchmarks/torch_module_calls.py [--repeats N]

Global hooks are forced by making ``module_brackets.can_bracket`` answer False, which is the
path a function root takes; the Python bracket by making ``module_brackets._native_functions``
answer None, so the native extension makes no brackets (the pure host's bracket, and that of a
capture with live edits). Torch runs on one thread, as in the other benchmark scripts. The
trace's ops and module calls are the same every way (``test_torch_module_brackets.py``).
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


def traced_with(reporting: str, model: torch.nn.Module, x: torch.Tensor) -> Callable[[], object]:
    """A trace of ``model`` whose module calls are reported by ``reporting``: ``brackets`` (what
    a capture chooses), ``python brackets`` or ``hooks``."""
    import torchlens as tl
    from torchlens.backends.torch import module_brackets

    bracketing = module_brackets.can_bracket
    native_functions = module_brackets._native_functions

    def run() -> object:
        if reporting == "brackets":
            return tl.trace(model, x)
        if reporting == "python brackets":
            module_brackets._native_functions = lambda: None
        else:
            module_brackets.can_bracket = lambda modules: False
        try:
            return tl.trace(model, x)
        finally:
            module_brackets.can_bracket = bracketing
            module_brackets._native_functions = native_functions

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    torch.set_num_threads(1)
    print(
        "| model | module calls | plain ms | global hooks × plain | Python brackets × plain "
        "| brackets × plain | saved per call against hooks µs | against Python brackets µs |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, model, x in models():
        with torch.no_grad():
            calls = module_calls(model, x)
            once = traced_with("brackets", model, x)
            once()
            block = max(1, int(0.05 / max(_seconds(once), 1e-6)))
            runs: Dict[str, Callable[[], object]] = {
                "plain": lambda model=model, x=x: model(x),
                "hooks": traced_with("hooks", model, x),
                "python brackets": traced_with("python brackets", model, x),
                "brackets": traced_with("brackets", model, x),
            }
            times = interleaved(runs, options.repeats, block)
        plain = times["plain"]
        against_hooks = (times["hooks"] - times["brackets"]) / calls * 1e6
        against_python = (times["python brackets"] - times["brackets"]) / calls * 1e6
        print(
            f"| {name} | {calls} | {plain * 1e3:.2f} | {times['hooks'] / plain:.3f} | "
            f"{times['python brackets'] / plain:.3f} | {times['brackets'] / plain:.3f} | "
            f"{against_hooks:.1f} | {against_python:.1f} |"
        )


def _seconds(run: Callable[[], object]) -> float:
    import time

    start = time.perf_counter()
    run()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
