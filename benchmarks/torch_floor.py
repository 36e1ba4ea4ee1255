"""The floor under a torch capture that saves every value: what any such capture pays, whatever
it records.

A capture sees every function call through a function mode and holds every output to the end of
the forward, so each op writes into fresh memory instead of the buffer the previous op just freed;
an in-place op must keep the value it overwrites, so it runs out of place (the model's tensor
taking the result's storage, as ``torchlens.backends.torch.out_of_place`` does). ``HoldingFloor``
does exactly that and nothing else: no ids, no events, no core, no module calls. A trace's time
above this floor is what TorchLens itself costs; the floor's time above a plain forward is what
no recorder on this path can remove. ``torch_overhead.py`` measures it in the same turns as the
trace, and ``make bench-all`` prints it beside the torch targets. (It borrows TorchLens's own
naming and out-of-place twins, so it imports our package: only the "ours" side runs it.)
"""

from __future__ import annotations

from typing import Any, Callable, List

import torch
from torch.overrides import TorchFunctionMode

from torchlens.backends.torch.naming import describe
from torchlens.backends.torch.out_of_place import run_out_of_place, takes_place_of


class HoldingFloor(TorchFunctionMode):
    """A function mode that holds every output and runs in-place ops out of place."""

    def __init__(self) -> None:
        super().__init__()
        self.held: List[Any] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name, in_place = describe(func)
        in_place = in_place or kwargs.get("inplace") is True
        target = args[0] if args else None
        if in_place and type(target) is torch.Tensor:
            result = run_out_of_place(func, name, args, kwargs)
            if result is not None and takes_place_of(result, target):
                # The overwritten value stays held on its storage; the model's tensor moves on.
                old = torch.empty(0, dtype=target.dtype, device=target.device)
                old.set_(target.untyped_storage(), target.storage_offset(), target.shape, target.stride())
                self.held.append(old)
                target.set_(result)
                return target
            self.held.append(target.clone())
        output = func(*args, **kwargs)
        self.held.append(output)
        return output


def floor_run(model: torch.nn.Module, x: Any) -> Callable[[], object]:
    """One forward of ``model`` under the floor; returns what it held (dropped by the caller, as
    a trace is)."""

    def run() -> object:
        with HoldingFloor() as mode:
            model(x)
        return mode.held

    return run
