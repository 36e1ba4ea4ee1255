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
