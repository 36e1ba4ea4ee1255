"""Single-pass selective capture on torch: under a narrow ``save=`` the live plan decides each op
as it returns, so a value it does not select is released while the forward still runs (checked
on the storages themselves, with torch's storage weak references), a module boundary holds an
inner value only while the model does, and the saved set is exactly what the selector matches
plus the constants and buffers replay reads."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
from torch.multiprocessing.reductions import StorageWeakRef

import torchlens as tl
from torchlens.errors import SelectionIncompleteWarning

pytestmark = pytest.mark.torch


def storage_ref(tensor: torch.Tensor) -> StorageWeakRef:
    return StorageWeakRef(tensor.untyped_storage())


class Chain(nn.Module):
    """Linear → relu, four times; at the end of its forward (before it returns) it records which
    intermediate storages are still alive. Its own locals never outlive a step."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))
        self.alive = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        refs = {"linear": [], "relu": []}
        for layer in self.layers:
            hidden = layer(x)
            refs["linear"].append(storage_ref(hidden))
            x = torch.relu(hidden)
            refs["relu"].append(storage_ref(x))
            del hidden
        # The last relu output is the model's own (it returns it); judge the others.
        self.alive = {kind: [not ref.expired() for ref in found[:-1]] for kind, found in refs.items()}
        return x


@pytest.fixture
def chain():
    torch.manual_seed(0)
    return Chain().eval(), torch.randn(32, 64)


def test_unselected_values_are_released_before_the_forward_returns(chain):
    model, x = chain
    with torch.no_grad():
        trace = tl.trace(model, x, save=tl.func("relu"))
    assert model.alive == {"linear": [False, False, False], "relu": [True, True, True]}
    assert [op.func_name for op in trace.saved_ops] == ["relu"] * 4
    with torch.no_grad():
        tl.trace(model, x)
    # A full trace keeps every value (the check above is not vacuous).
    assert model.alive == {"linear": [True, True, True], "relu": [True, True, True]}


def test_a_label_is_decided_at_its_op_and_everything_else_released(chain):
    model, x = chain
    with torch.no_grad():
        labels = [op.label for op in tl.trace(model, x, save=False).ops if op.func_name == "linear"]
        trace = tl.trace(model, x, save=tl.label(labels[1]))
    assert model.alive == {"linear": [False, True, False], "relu": [False, False, False]}
    assert [op.label for op in trace.saved_ops] == [labels[1]]
    torch.testing.assert_close(trace[labels[1]].out, model.layers[1](torch.relu(model.layers[0](x))))


class Block(nn.Module):
    """conv → batch norm → in-place relu → conv, like a residual block's body; it checks, before
    returning, that the values it let go of are gone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.inner_alive = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first = self.conv1(x)
        first_ref = storage_ref(first)
        normed = self.relu(self.norm(first))
        del first
        out = self.conv2(normed)
        normed_ref = storage_ref(normed)
        del normed
        self.inner_alive = (not first_ref.expired(), not normed_ref.expired())
        return out


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 1)
        self.block = Block()
        self.passthrough = nn.Identity()
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.returned = self.head(self.passthrough(self.block(self.stem(x))))
        return self.returned


@pytest.fixture
def net():
    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 3, 8, 8)


def test_a_module_boundary_holds_inner_values_only_while_the_model_does(net):
    model, x = net
    with torch.no_grad():
        trace = tl.trace(model, x, save=tl.module("block"))
        expected = model.block(model.stem(x))
    # Inside the block, values the block let go of (and the batch norm output the in-place
    # relu overwrote) were released before the block returned.
    assert model.block.inner_alive == (False, False)
    saved = [op for op in trace.saved_ops if op.func_name not in ("buffer", "constant")]
    assert len(saved) == 1
    torch.testing.assert_close(saved[0].out, expected)
    with torch.no_grad():
        tl.trace(model, x)
    assert model.block.inner_alive == (True, True)


def test_a_module_returning_a_value_it_did_not_compute_saves_that_value(net):
    model, x = net
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionIncompleteWarning)
        with torch.no_grad():
            trace = tl.trace(model, x, save=tl.module("passthrough"))
            expected = model.block(model.stem(x))
    assert trace.selection_missed == []
    saved = [op for op in trace.saved_ops if op.out is not None and op.out.shape == expected.shape]
    assert len(saved) == 1
    torch.testing.assert_close(saved[0].out, expected)


@pytest.mark.parametrize(
    "selector",
    [
        tl.func("conv2d"),
        tl.module("block"),
        tl.in_module("block") & ~tl.func("relu"),
        tl.label_contains("batchnorm"),
        tl.module("block.relu") | tl.func("__add__"),
    ],
    ids=repr,
)
def test_saved_ops_are_exactly_the_matched_ops_plus_constants_and_buffers(net, selector):
    model, x = net
    with torch.no_grad():
        full = tl.trace(model, x)
        narrow = tl.trace(model, x, save=selector)
    matched = {op.label for op in full.select(selector) if op.kind != "output"}
    leaves = {op.label for op in full.ops if op.kind in ("constant", "buffer")}
    assert {op.label for op in narrow.saved_ops} == matched | leaves
    for op in narrow.saved_ops:
        torch.testing.assert_close(op.out, full[op.label].out)


def test_a_selected_value_is_kept_without_a_copy_unless_an_in_place_write_changes_it(net):
    model, x = net
    with torch.no_grad():
        trace = tl.trace(model, x, save=tl.func("conv2d") | tl.func("batch_norm"))
        normed = model.block.norm(model.block.conv1(model.stem(x)))
    norm_op = next(op for op in trace.saved_ops if op.func_name == "batch_norm")
    # The in-place relu overwrote the batch norm output: the payload was copied first.
    torch.testing.assert_close(norm_op.out, normed)
    assert (norm_op.out < 0).any()
    # Nothing wrote into the head's output: the payload is the model's own storage.
    head = [op for op in trace.saved_ops if op.func_name == "conv2d"][-1]
    assert head.out.untyped_storage().data_ptr() == model.returned.untyped_storage().data_ptr()


class KeywordList(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = torch.relu(x), torch.sigmoid(x)
        refs = [storage_ref(first), storage_ref(second)]
        joined = torch.cat(tensors=[first, second], dim=0)
        del first, second
        self.alive = [not ref.expired() for ref in refs]
        return joined.sum(0)


def test_arrays_in_a_keyword_list_are_parents_and_are_not_held_by_replay_records():
    model, x = KeywordList(), torch.randn(3, 4)
    with torch.no_grad():
        trace = tl.trace(model, x, save=tl.func("sum"))
    assert model.alive == [False, False]
    cat = next(op for op in trace.ops if op.func_name == "cat")
    assert sorted(parent.func_name for parent in cat.parents) == ["relu", "sigmoid"]
    with torch.no_grad():
        assert tl.trace(model, x).validate_forward_pass()
