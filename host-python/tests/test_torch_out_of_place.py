"""In-place ops run out of place (``backends/torch/out_of_place.py``): the value an in-place op
overwrites is kept by giving the model's tensor new storage instead of copying the old value, and
only where nothing could tell the difference. Each case compares the traced run with a plain one."""

from __future__ import annotations

import pytest
import torch

import torchlens as tl
from torchlens.backends.torch import capture as torch_capture

pytestmark = pytest.mark.torch


@pytest.fixture
def swaps(monkeypatch):
    """Counts storage swaps and copies made for in-place ops during the test."""
    counts = {"swapped": 0, "copied": 0}
    swap, protect = torch_capture.Capture._swap_storage, torch_capture.Capture.protect

    def counting_swap(self, *args):
        counts["swapped"] += 1
        return swap(self, *args)

    def counting_protect(self, *args):
        counts["copied"] += 1
        return protect(self, *args)

    monkeypatch.setattr(torch_capture.Capture, "_swap_storage", counting_swap)
    monkeypatch.setattr(torch_capture.Capture, "protect", counting_protect)
    return counts


class Residual(torch.nn.Module):
    """The in-place ops of a ResNet block: ``ReLU(inplace=True)`` and ``out += identity``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.act = torch.nn.ReLU(inplace=True)
        self.fc2 = torch.nn.Linear(8, 8)

    def forward(self, x):
        out = self.act(self.fc1(x))
        out = self.fc2(out)
        out += x
        out.mul_(0.5)
        return self.act(out)


def test_in_place_ops_swap_storage_and_keep_every_value(swaps):
    torch.manual_seed(0)
    model, x = Residual().eval(), torch.randn(4, 8)
    with torch.no_grad():
        trace = tl.trace(model, x)
        expected = model(x)
    # relu, +=, mul_, relu: four in-place ops, none copied.
    assert swaps == {"swapped": 4, "copied": 0}
    assert torch.equal(trace.output, expected)
    with torch.no_grad():
        first = model.fc1(x)
        hidden = model.fc2(torch.relu(first))
        summed = hidden + x
    ops = {op.label: op for op in trace.ops}
    linears = [op for op in trace.ops if op.func_name == "linear"]
    assert torch.equal(linears[0].out, first)  # overwritten by the first relu, yet kept
    assert torch.equal(linears[1].out, hidden)  # overwritten by +=
    adds = [op for op in trace.ops if op.func_name == "add_"]  # `out += x` reaches the mode as add_
    assert adds and adds[0].in_place and torch.equal(adds[0].out, summed)
    muls = [op for op in trace.ops if op.func_name == "mul_"]
    assert torch.equal(muls[0].out, summed * 0.5)
    assert ops[trace.outputs[0].parents[0].label].in_place
    assert tl.validate(trace) is True


def test_values_kept_by_a_swap_read_back_save_and_load(tmp_path):
    model, x = Residual().eval(), torch.randn(4, 8)
    with torch.no_grad():
        trace = tl.trace(model, x)
    # No version guard trips on the storage a swap left behind, and the file holds the same.
    values = {op.label: op.out for op in trace.saved_ops}
    path = str(tmp_path / "residual.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    for op in loaded.saved_ops:
        assert torch.equal(torch.as_tensor(op.out), values[op.label])


def test_with_gradients_the_old_value_is_copied(swaps):
    model, x = Residual().eval(), torch.randn(4, 8)
    trace = tl.trace(model, x)  # parameters need gradients: autograd must see the in-place ops
    assert swaps["swapped"] == 0 and swaps["copied"] == 4
    with torch.no_grad():
        assert torch.allclose(trace.output, model(x))


class ViewedInPlace(torch.nn.Module):
    """Keeps a view of a tensor that an in-place op then changes: the view must see the change."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        hidden = self.fc(x)
        flat = hidden.view(-1)
        hidden.relu_()
        return flat * 1.0


def test_a_tensor_with_a_live_view_is_written_in_place(swaps):
    model, x = ViewedInPlace().eval(), torch.randn(4, 8)
    with torch.no_grad():
        trace = tl.trace(model, x)
        expected = model(x)
    assert swaps["swapped"] == 0
    assert torch.equal(trace.output, expected)
    assert (trace.output >= 0).all()


class ExportedInPlace(torch.nn.Module):
    """Hands a tensor's memory to NumPy, then changes the tensor in place: the array sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        hidden = self.fc(x)
        array = hidden.numpy()
        hidden.relu_()
        return torch.from_numpy(array.copy())


def test_after_memory_is_handed_out_in_place_ops_copy(swaps):
    model, x = ExportedInPlace().eval(), torch.randn(4, 8)
    with torch.no_grad():
        trace = tl.trace(model, x)
        expected = model(x)
    assert swaps["swapped"] == 0
    assert torch.equal(trace.output, expected)
    assert (trace.output >= 0).all()


class ImportedInPlace(torch.nn.Module):
    """Makes a tensor over a NumPy array's memory, then changes the tensor in place: the array,
    which the model reads afterwards, sees the change."""

    def forward(self, x):
        import numpy

        array = numpy.array(x.tolist(), dtype=numpy.float32) - 0.5
        shared = torch.as_tensor(array)
        shared.relu_()
        return torch.from_numpy(array.copy()) + x


def test_a_tensor_over_numpy_memory_is_written_in_place(swaps):
    model, x = ImportedInPlace(), torch.rand(16)
    with torch.no_grad():
        trace = tl.trace(model, x)
        expected = model(x)
    assert swaps["swapped"] == 0
    assert torch.equal(trace.output, expected)


class WideningInPlace(torch.nn.Module):
    """An in-place op whose out-of-place twin would change the dtype: torch refuses it."""

    def forward(self, x):
        counts = x.long()
        counts += x
        return counts


def test_an_in_place_op_torch_refuses_still_raises_what_torch_raises():
    model, x = WideningInPlace(), torch.randn(4)
    with pytest.raises(RuntimeError) as plain:
        model(x)
    with pytest.raises(RuntimeError) as traced:
        tl.trace(model, x)
    assert str(traced.value) == str(plain.value)


class RandomInPlace(torch.nn.Module):
    """An in-place op whose out-of-place namesake means something else (``bernoulli_(p)``
    fills with probability p; ``bernoulli()`` draws from the tensor's own values)."""

    def forward(self, x):
        hidden = x * 1.0
        hidden.bernoulli_(0.5)
        return hidden


def test_an_unlisted_in_place_op_copies(swaps):
    model, x = RandomInPlace(), torch.randn(64)
    torch.manual_seed(3)
    with torch.no_grad():
        expected = model(x)
    torch.manual_seed(3)
    with torch.no_grad():
        trace = tl.trace(model, x)
    assert swaps["swapped"] == 0 and swaps["copied"] == 1
    assert torch.equal(trace.output, expected)


def _argument_sets():
    """For each listed in-place op: a call on a fresh tensor (the target first) that torch
    accepts, as ``(name, call)``; ``call(target)`` runs it."""
    import torch.nn.functional as F

    other = torch.linspace(0.5, 1.5, 12).reshape(3, 4)
    mask = torch.arange(12).reshape(3, 4) % 3 == 0
    method_calls = {
        "relu_": lambda t: t.relu_(),
        "add_": lambda t: t.add_(other, alpha=2),
        "sub_": lambda t: t.sub_(other),
        "mul_": lambda t: t.mul_(other),
        "div_": lambda t: t.div_(other, rounding_mode="floor"),
        "clamp_": lambda t: t.clamp_(min=-0.5, max=0.5),
        "clamp_min_": lambda t: t.clamp_min_(0.1),
        "clamp_max_": lambda t: t.clamp_max_(0.2),
        "sigmoid_": lambda t: t.sigmoid_(),
        "tanh_": lambda t: t.tanh_(),
        "neg_": lambda t: t.neg_(),
        "abs_": lambda t: t.abs_(),
        "exp_": lambda t: t.exp_(),
        "sqrt_": lambda t: t.sqrt_(),  # NaN below zero, in both
        "masked_fill_": lambda t: t.masked_fill_(mask, 1.5),
        "__iadd__": lambda t: t.__iadd__(other),
        "__isub__": lambda t: t.__isub__(other),
        "__imul__": lambda t: t.__imul__(other),
        "__itruediv__": lambda t: t.__itruediv__(other),
    }
    keyword_calls = {
        name: (lambda t, name=name: getattr(F, name)(t, inplace=True))
        for name in ("relu", "relu6", "hardtanh", "leaky_relu", "elu", "selu", "celu", "silu")
        + ("hardswish", "hardsigmoid", "mish")
    }
    keyword_calls["_threshold"] = lambda t: F.threshold(t, 0.1, 20.0, inplace=True)  # its name
    return {**method_calls, **keyword_calls}


def test_every_listed_op_has_a_case():
    from torchlens.backends.torch.out_of_place import KEYWORD_TWINS, METHOD_TWINS

    assert set(_argument_sets()) == set(METHOD_TWINS) | set(KEYWORD_TWINS)


class OneInPlace(torch.nn.Module):
    """A fresh value, one in-place op on it, and a later read of the result."""

    def __init__(self, call) -> None:
        super().__init__()
        self.call = call

    def forward(self, x):
        hidden = x * 1.0
        self.call(hidden)
        return hidden + 0.0


@pytest.mark.parametrize("name", sorted(_argument_sets()))
def test_each_listed_op_swaps_and_computes_what_the_in_place_op_computes(name, swaps):
    call = _argument_sets()[name]
    model, x = OneInPlace(call), torch.linspace(-2.0, 2.0, 12).reshape(3, 4)
    with torch.no_grad():
        expected = model(x)
        trace = tl.trace(model, x)
    assert swaps == {"swapped": 1, "copied": 0}
    # Bit for bit (NaN where both have NaN): the twin is the same computation.
    torch.testing.assert_close(trace.output, expected, rtol=0, atol=0, equal_nan=True)
    scaled = trace.ops[1]  # x * 1.0, the value the in-place op overwrote
    assert torch.equal(scaled.out, x * 1.0)
    assert tl.validate(trace) is True
