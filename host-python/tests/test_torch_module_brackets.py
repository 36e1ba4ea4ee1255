"""Module calls reach a torch capture through a bracket on each module of the traced model
(``torchlens/backends/torch/module_brackets.py``), not through global hooks: the model's modules
stay on torch's fast path, the trace's module structure is the same, and every module gets back
exactly what it had when the capture ends, normally, by an exception, or on several threads."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn as nn

import torchlens as tl
from torchlens.backends.torch import module_brackets

pytestmark = pytest.mark.torch


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Outer(nn.Module):
    def __init__(self, probe=None) -> None:
        super().__init__()
        self.first = Inner()
        self.second = Inner()
        self.probe = probe

    def forward(self, x):
        if self.probe is not None:
            self.probe(self)
        return self.second(self.first(x)) + 1


def _global_hooks():
    module = torch.nn.modules.module
    return len(module._global_forward_pre_hooks) + len(module._global_forward_hooks)


def test_no_global_hook_is_registered_and_every_module_is_bracketed_during_the_capture():
    seen = {}

    def probe(model):
        seen["global_hooks"] = _global_hooks()
        seen["bracketed"] = sorted(
            name for name, module in model.named_modules() if "forward" in module.__dict__
        )

    model = Outer(probe)
    trace = tl.trace(model, torch.randn(2, 4))
    assert seen["global_hooks"] == 0
    assert seen["bracketed"] == ["", "first", "first.fc", "second", "second.fc"]
    assert [op.module for op in trace if op.func_name == "linear"] == ["first.fc:1", "second.fc:1"]
    assert [op.module for op in trace if op.func_name == "relu"] == ["first:1", "second:1"]


def test_every_module_gets_back_what_its_dict_held():
    model = Outer()
    own_forward = model.second.forward  # an instance attribute set by the user stays theirs
    model.second.__dict__["forward"] = own_forward
    trace = tl.trace(model, torch.randn(2, 4))
    assert model.second.__dict__["forward"] is own_forward
    assert all("forward" not in module.__dict__ for module in (model, model.first, model.first.fc))
    assert module_brackets.installed_count() == 0 and _global_hooks() == 0
    # The user's own instance forward was bracketed too: its ops belong to the call.
    assert [op.module for op in trace if op.func_name == "relu"] == ["first:1", "second:1"]


def test_an_exception_in_the_forward_takes_every_bracket_off():
    class Failing(Outer):
        def forward(self, x):
            self.first(x)
            raise ValueError("inside the forward")

    model = Failing()
    with pytest.raises(ValueError):
        tl.trace(model, torch.randn(2, 4))
    assert module_brackets.installed_count() == 0
    assert all("forward" not in module.__dict__ for module in model.modules())
    assert len(tl.trace(Outer(), torch.randn(2, 4))) > 0


def test_a_module_that_refuses_a_hook_leaves_no_bracket_or_hook_behind():
    class RefusesForwardHooks(Inner):
        def register_forward_hook(self, *args, **kwargs):
            raise RuntimeError("this module takes no forward hook")

    model = Outer()
    model.second = RefusesForwardHooks()
    user_hook = model.second.register_forward_pre_hook(lambda module, args: None)
    with pytest.raises(RuntimeError, match="takes no forward hook"):
        tl.trace(model, torch.randn(2, 4))
    assert module_brackets.installed_count() == 0
    assert all("forward" not in module.__dict__ for module in model.modules())
    assert list(model.second._forward_pre_hooks) == [user_hook.id]
    assert _global_hooks() == 0


def test_a_module_with_hooks_of_its_own_keeps_the_order_global_hooks_gave():
    model = Outer()
    model.first.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    model.first.register_forward_hook(lambda module, args, output: output - 3)
    trace = tl.trace(model, torch.randn(2, 4))
    by_func = {op.func_name: op.module for op in trace if op.func_name in ("mul", "sub")}
    # The pre-hook's op inside the call, the forward hook's op after it (in the root).
    assert by_func == {"mul": "first:1", "sub": "self"}
    assert "forward" not in model.first.__dict__
    assert len(model.first._forward_pre_hooks) == 1 and len(model.first._forward_hooks) == 1


@pytest.mark.parametrize(
    "narrow",
    [(), ("second",), ("first",)],
    ids=["both-full", "second-narrow", "first-narrow"],
)
def test_overlapping_captures_on_two_threads_share_the_brackets_and_take_them_off_at_the_end(narrow):
    """Also when one of the captures reports module calls through Python hooks (a narrow
    ``save=``) and the other through native ones: on the native host the brackets a capture
    with native hooks puts on are native records, which the other capture then shares (and the
    other way round)."""
    first_inside = threading.Event()
    checked = threading.Event()
    results = {}

    def hold_until_checked(model):
        if threading.current_thread().name == "first":
            first_inside.set()
            assert checked.wait(30)

    model = Outer(hold_until_checked)
    x = torch.randn(2, 4)

    def run(name):
        save = (tl.func("relu") | tl.func("linear")) if name in narrow else None
        results[name] = tl.trace(model, x, save=save)

    first = threading.Thread(target=run, args=("first",), name="first")
    first.start()
    try:
        assert first_inside.wait(30)
        second = threading.Thread(target=run, args=("second",), name="second")
        second.start()
        second.join(30)
        assert "second" in results
        # The second capture ended while the first still runs: the brackets stay for the first.
        assert all("forward" in module.__dict__ for module in model.modules())
    finally:
        checked.set()
        first.join(30)
    assert module_brackets.installed_count() == 0
    assert all("forward" not in module.__dict__ for module in model.modules())
    labels = [[(op.label, op.module) for op in results[name]] for name in ("first", "second")]
    assert labels[0] == labels[1]
    assert [module for _, module in labels[0] if module.endswith(".fc:1")] == ["first.fc:1", "second.fc:1"]


def test_a_function_root_keeps_global_hooks_for_the_modules_it_calls():
    layer = nn.Linear(4, 4)

    def function(x):
        return torch.relu(layer(x))

    trace = tl.trace(function, torch.randn(2, 4))
    modules = [op.module for op in trace if op.func_name == "linear"]
    assert len(modules) == 1 and modules[0] != "self"
    assert _global_hooks() == 0 and "forward" not in layer.__dict__


def test_on_the_native_host_the_bracket_is_native_and_reports_the_same_calls():
    """The native host brackets with ``_native.ModuleBracket`` (no Python frame per module
    call); the pure host with the Python bracket, which stays the definition. Either way
    keyword arguments reach the forward, a signature is read through the bracket, and the
    trace's module calls are the same."""
    import inspect

    from torchlens._hosts import active

    class Keyworded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

        def forward(self, x, *, scale=1.0):
            return self.inner(x) * scale

    seen = {}

    class Root(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = Keyworded()

        def forward(self, x):
            bracket = self.body.__dict__.get("forward")
            if bracket is not None:  # during a capture
                seen["kind"] = type(bracket).__name__
                seen["parameters"] = list(inspect.signature(bracket).parameters)
            return self.body(x, scale=2.0)

    model = Root()
    x = torch.randn(2, 4)
    trace = tl.trace(model, x)
    assert seen["kind"] == ("ModuleBracket" if active().name == "native" else "function")
    assert seen["parameters"] == ["x", "scale"]
    assert torch.equal(trace.output, model(x))
    assert [op.module for op in trace if op.func_name == "linear"] == ["body.inner.fc:1"]
    assert [op.module for op in trace if op.func_name in ("__mul__", "mul")] == ["body:1"]
    assert module_brackets.installed_count() == 0
