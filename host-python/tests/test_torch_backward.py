"""True backward capture on torch (``save_grads=``, ``backward_ready=True``), gradient-site edits
and ``tl.backends.torch.GradOptions``: every gradient is compared with the same thing done by
hand (tensor ``register_hook``s installed by forward hooks, ``torch.autograd.grad``) on a
battery of small models, including a module called twice (one gradient per call)."""

from __future__ import annotations

import copy
import gc
import re
import weakref
from functools import partial
from typing import Dict, List

import pytest
import torch
import torch.nn as nn

import torchlens as tl
from conformance.models.torch import Mlp, PooledCnn, ProjectedAttention, Residual, Shared
from torchlens.errors import BackendUnsupportedError, NotFoundError, SelectorMatchedNothingWarning
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.torch


#: The backward tests' models: one more output activation module on the Mlp, a GELU module
#: between the Shared block's two calls (a leaf with one gradient per call).
TanhMlp = partial(Mlp, 6, 8, 5, nn.Tanh)
GeluShared = partial(Shared, 5, nn.GELU)


BATTERY = [
    ("mlp", TanhMlp, (3, 6)),
    ("cnn", PooledCnn, (2, 3, 8, 8)),
    ("residual", Residual, (2, 4, 5, 5)),
    ("attention", ProjectedAttention, (2, 4, 8)),
    ("shared", GeluShared, (3, 5)),
]


def _loss(output: torch.Tensor) -> torch.Tensor:
    # Not a plain sum, so every gradient depends on the values.
    return (output * output).sum() + output.sum()


def _by_hand(model: nn.Module, x: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
    """Each leaf module call's output gradient, in call order, from hand-written tensor hooks."""
    grads: Dict[str, List[torch.Tensor]] = {}
    handles = []
    for address, module in model.named_modules():
        if not address or list(module.children()):
            continue

        def forward_hook(module, args, output, address=address):
            slot: List[torch.Tensor] = []
            grads.setdefault(address, []).append(slot)
            output.register_hook(lambda grad: slot.append(grad.detach().clone()))

        handles.append(module.register_forward_hook(forward_hook))
    try:
        _loss(model(x)).backward()
    finally:
        for handle in handles:
            handle.remove()
    return {address: [slot[0] if slot else None for slot in calls] for address, calls in grads.items()}


def _pair(build, shape):
    torch.manual_seed(0)
    model = build().eval()
    return model, copy.deepcopy(model), torch.randn(*shape)


@pytest.mark.parametrize("name, build, shape", BATTERY, ids=[case[0] for case in BATTERY])
def test_op_grads_equal_hand_written_hooks(name, build, shape):
    model, twin, x = _pair(build, shape)
    trace = tl.trace(model, x, save_grads=True)
    assert trace.output.grad_fn is not None and not trace.has_backward_pass
    _loss(trace.output).backward()
    assert trace.has_backward_pass and trace.autograd.has_backward_pass
    expected = _by_hand(twin, x)
    compared = 0
    for address, calls in expected.items():
        for call, grad in enumerate(calls, start=1):
            (op,) = trace.select(tl.module(f"{address}:{call}"))
            assert op in trace.saved_grad_ops
            torch.testing.assert_close(op.grad, grad, rtol=1e-5, atol=1e-6)
            assert len(op.autograd.grads) == 1
            torch.testing.assert_close(op.autograd.grads[0], grad, rtol=1e-5, atol=1e-6)
            compared += 1
    assert compared >= 3
    for address, param in twin.named_parameters():
        torch.testing.assert_close(trace.params[address].grad, param.grad, rtol=1e-5, atol=1e-6)
    # The output op carries its producer's gradient: d loss / d output = 2 * output + 1.
    (output_op,) = trace.outputs
    torch.testing.assert_close(output_op.grad, 2 * trace.output.detach() + 1)


@pytest.mark.parametrize(
    "build, shape, address", [(Residual, (2, 4, 5, 5), "relu"), (GeluShared, (3, 5), "block")]
)
def test_a_module_called_twice_has_one_gradient_per_call(build, shape, address):
    model, twin, x = _pair(build, shape)
    trace = tl.trace(model, x, save_grads=tl.module(address))
    _loss(trace.output).backward()
    first, second = (trace.select(tl.module(f"{address}:{call}"))[0] for call in (1, 2))
    assert first.index != second.index and first.layer_label == second.layer_label
    hand = _by_hand(twin, x)[address]
    torch.testing.assert_close(first.grad, hand[0])
    torch.testing.assert_close(second.grad, hand[1])
    assert not torch.allclose(first.grad, second.grad)
    assert {op.index for op in trace.saved_grad_ops} == {first.index, second.index}


def test_a_selector_saves_only_the_ops_it_matches():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, capture=CaptureOptions(save_grads=tl.func("relu") | tl.func("tanh")))
    _loss(trace.output).backward()
    assert [op.func_name for op in trace.saved_grad_ops] == ["relu", "tanh"]
    assert all(op.grad is None for op in trace.ops if op not in trace.saved_grad_ops)
    assert trace.save_grads and trace.backward_ready


def test_gradients_of_an_input_that_requires_grad():
    model, _, x = _pair(TanhMlp, (3, 6))
    x.requires_grad_(True)
    trace = tl.trace(model, x, save_grads=True)
    _loss(trace.output).backward()
    (input_op,) = trace.inputs
    torch.testing.assert_close(input_op.grad, x.grad)


def test_each_backward_pass_adds_a_gradient():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, save_grads=True)
    _loss(trace.output).backward(retain_graph=True)
    (2 * trace.output.sum()).backward()
    assert trace.num_backward_passes == 2
    op = trace.select(tl.module("fc2"))[0]
    first, second = op.autograd.grads
    assert not torch.allclose(first, second)
    torch.testing.assert_close(op.grad, second)
    assert torch.allclose(trace.select(tl.module("out"))[0].grad, torch.full((3, 5), 2.0))


def test_backward_ready_keeps_the_graph_without_saving_gradients():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, capture=CaptureOptions(backward_ready=True))
    assert trace.output.requires_grad and trace.backward_ready and not trace.save_grads
    assert len(trace.backward_graph) > 0
    _loss(trace.output).backward()
    assert trace.has_backward_pass and trace.saved_grad_ops == []
    assert trace.params["fc1.weight"].grad is model.fc1.weight.grad is not None


def test_without_backward_capture_the_output_is_detached():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x)
    assert trace.backward is None and trace.output.grad_fn is None
    assert not trace.has_backward_pass and trace.saved_grad_ops == [] and trace.grad_fns == []
    torch.testing.assert_close(trace.output, model(x))


def test_the_backward_graph_links_grad_fns_to_forward_ops():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, save_grads=True)
    graph = trace.backward_graph
    labels = [node.label for node in graph]
    assert labels[0] == "tanh_back_1_1"
    by_op = {node.op_label: node.class_name for node in graph if node.has_op}
    assert by_op == {
        "linear_1_2": "AddmmBackward0",
        "relu_1_3": "ReluBackward0",
        "linear_2_4": "AddmmBackward0",
        "tanh_1_5": "TanhBackward0",
    }
    accumulators = {node.param for node in graph if node.class_name == "AccumulateGrad"}
    assert accumulators == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    edges = set(graph.edges)
    tanh = graph["tanh_back_1_1"]
    (relu,) = [node for node in graph if node.class_name == "ReluBackward0"]
    assert relu.label.startswith("relu_back_1_")
    assert ("tanh_back_1_1", graph.nodes[tanh.children[0]].label) in edges
    assert graph.nodes[tanh.children[0]].op_label == "linear_2_4"
    assert graph.nodes[relu.children[0]].op_label == "linear_1_2"
    assert [root.label for root in graph.roots] == ["tanh_back_1_1"]
    # The graph walked by hand from the output has the same functions and edges.
    seen, stack, hand_edges = set(), [trace.output.grad_fn], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for child, _ in node.next_functions:
            if child is not None:
                hand_edges.add((type(node).__name__, type(child).__name__))
                stack.append(child)
    assert len(seen) == len(graph)
    classes = {node.label: node.class_name for node in graph}
    assert {(classes[a], classes[b]) for a, b in edges} == hand_edges


def test_grad_site_edits_change_the_gradient_that_flows():
    model, twin, x = _pair(TanhMlp, (3, 6))
    rule = tl.when(tl.grad(tl.module("act")), tl.zero_ablate())
    trace = tl.trace(model, x, save_grads=True, intervene=rule)
    _loss(trace.output).backward()
    (act,) = trace.select(tl.module("act"))
    assert torch.count_nonzero(act.grad) == 0
    # Nothing flows below the zeroed gradient: fc1's parameters get zero gradients.
    assert torch.count_nonzero(model.fc1.weight.grad) == 0
    assert torch.count_nonzero(model.fc2.weight.grad) > 0
    assert [(record.timing, record.helper_name) for record in act.edits] == [("backward", "zero_ablate")]
    # The forward is unchanged.
    torch.testing.assert_close(trace.output.detach(), twin(x))


def test_grad_site_scale_and_callable_by_hand():
    model, twin, x = _pair(GeluShared, (3, 5))
    rules = [
        tl.when(tl.grad(tl.module("block:2")), tl.scale(3.0)),
        tl.when(tl.grad(tl.module("act")), lambda grad: grad + 1.0),
    ]
    trace = tl.trace(model, x, save_grads=True, intervene=rules)
    _loss(trace.output).backward()
    handles = []

    def tap(module, args, output):
        tap.calls += 1
        if tap.calls == 2:
            output.register_hook(lambda grad: grad * 3.0)

    tap.calls = 0
    handles.append(twin.block.register_forward_hook(tap))

    def plus_one(module, args, output):
        output.register_hook(lambda grad: grad + 1.0)

    handles.append(twin.act.register_forward_hook(plus_one))
    _loss(twin(x)).backward()
    for handle in handles:
        handle.remove()
    for address, param in twin.named_parameters():
        torch.testing.assert_close(trace.params[address].grad, param.grad, rtol=1e-5, atol=1e-6)
    second = trace.select(tl.module("block:2"))[0]
    torch.testing.assert_close(second.grad, 3.0 * (2 * trace.output.detach() + 1))


def test_a_grad_site_that_matches_nothing_warns():
    model, _, x = _pair(TanhMlp, (3, 6))
    with pytest.warns(SelectorMatchedNothingWarning):
        tl.trace(model, x, intervene=tl.when(tl.grad(tl.func("conv2d")), tl.zero_ablate()))


def test_grad_sites_refuse_on_a_backend_without_backward_capture():
    np = pytest.importorskip("numpy")
    mx = pytest.importorskip("mlx.core")
    del np
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            lambda a: mx.tanh(a),
            mx.ones((2,)),
            backend="mlx",
            intervene=tl.when(tl.grad(tl.func("tanh")), tl.zero_ablate()),
        )
    assert caught.value.code in tl.backends.REFUSAL_CODES


def test_save_grads_refuses_on_a_backend_without_backward_capture():
    mx = pytest.importorskip("mlx.core")
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(lambda a: mx.tanh(a), mx.ones((2,)), backend="mlx", save_grads=True)
    assert caught.value.code == "save_grads_unsupported"


def test_a_traced_armed_model_is_freed():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, save_grads=True)
    _loss(trace.output).backward()
    watcher = weakref.ref(trace)
    del trace
    gc.collect()
    assert watcher() is None


# ---- derived gradients (the preview backends' API) -----------------------------------------------


def test_grad_options_give_the_preview_backends_keys_equal_to_autograd():
    model, twin, x = _pair(TanhMlp, (3, 6))
    options = tl.backends.torch.GradOptions(loss_fn=_loss, input_grad_argnums=(0,))
    trace = tl.trace(model, x, capture=CaptureOptions(grad_options=options))
    copy_x = x.clone().requires_grad_(True)
    _loss(twin(copy_x)).backward()
    expected = {f"params.{name}": param.grad for name, param in twin.named_parameters()}
    expected["inputs.0"] = copy_x.grad
    assert set(trace.autograd.derived_grads) == set(expected)
    for key, grad in expected.items():
        torch.testing.assert_close(trace.autograd.derived_grads[key], grad, rtol=1e-5, atol=1e-6)
    # Derived, not captured: nothing the user holds changed and no backward pass is claimed.
    assert not trace.has_backward_pass and not trace.autograd.has_backward_pass
    assert all(param.grad is None for param in model.parameters()) and not x.requires_grad
    torch.testing.assert_close(trace.params["fc1.weight"].grad, expected["params.fc1.weight"])


def test_grad_options_intermediate_records_equal_hand_hooks():
    model, twin, x = _pair(PooledCnn, (2, 3, 8, 8))
    options = tl.backends.torch.GradOptions(loss_fn=_loss, intermediate_grads=True)
    trace = tl.trace(model, x, capture=CaptureOptions(grad_options=options))
    hand = _by_hand(twin, x)
    records = trace.autograd.intermediate_derived_grads
    for address, (grad,) in hand.items():
        (op,) = trace.select(tl.module(address))
        assert records[op.label].status == "exact"
        torch.testing.assert_close(op.autograd.derived_grad.value, grad, rtol=1e-5, atol=1e-6)
    assert op.autograd.grads == []


def test_grad_options_leave_batch_norm_statistics_alone():
    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train()

    with_grads, without = build(), build()
    x = torch.randn(5, 4)
    tl.trace(with_grads, x, capture=CaptureOptions(grad_options=tl.backends.torch.GradOptions()))
    tl.trace(without, x)
    # The auxiliary forward ran in training mode too; its statistics update was put back.
    for name, buffer in without.named_buffers():
        torch.testing.assert_close(dict(with_grads.named_buffers())[name], buffer)


def test_grad_options_refusals():
    model, _, x = _pair(TanhMlp, (3, 6))
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, x, capture=CaptureOptions(grad_options=object()))
    assert caught.value.code == "option_unsupported"
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            model,
            x,
            capture=CaptureOptions(grad_options=tl.backends.torch.GradOptions(input_grad_argnums=(2,))),
        )
    # The kit's preflight: a position that names no floating input is an invalid value.
    assert caught.value.code == "option_value_invalid"
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            model,
            x,
            capture=CaptureOptions(grad_options=tl.backends.torch.GradOptions(loss_fn=lambda out: out)),
        )
    assert caught.value.code == "option_value_invalid"


# ---- the backward pass in .tlspec files, the summary and the drawing --------------------------------


def _backward_trace():
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, save_grads=True)
    _loss(trace.output).backward()
    return trace


def test_a_backward_pass_round_trips_through_a_tlspec(tmp_path):
    trace = _backward_trace()
    path = str(tmp_path / "backward.tlspec")
    trace.save(path)
    loaded = tl.load(path, verify=True)
    assert loaded.has_backward_pass and loaded.num_backward_passes == 1
    assert [op.label for op in loaded.saved_grad_ops] == [op.label for op in trace.saved_grad_ops]
    for op in trace.saved_grad_ops:
        assert torch.equal(loaded[op.label].grad, op.grad)
        assert len(loaded[op.label].autograd.grads) == 1
    assert [node.as_dict() for node in loaded.grad_fns] == [node.as_dict() for node in trace.grad_fns]
    assert loaded.backward_graph.edges == trace.backward_graph.edges
    # The forward payloads are untouched, and the saved set does not count the gradients.
    assert [op.label for op in loaded.saved_ops] == [op.label for op in trace.saved_ops]
    for op in trace.saved_ops:
        assert torch.equal(loaded[op.label].out, op.out)
    assert loaded.summary() == trace.summary()
    # A loaded trace has no live parameters: their gradients were not saved.
    assert loaded.params["fc1.weight"].grad is None


def test_a_file_without_a_backward_pass_loads_without_one(tmp_path):
    model, _, x = _pair(TanhMlp, (3, 6))
    path = str(tmp_path / "forward.tlspec")
    tl.trace(model, x).save(path)
    loaded = tl.load(path, verify=True)
    assert loaded.backward is None and not loaded.has_backward_pass and loaded.grad_fns == []
    assert "backward:" not in loaded.summary()


def test_a_graph_saved_before_any_backward_round_trips_without_gradients(tmp_path):
    model, _, x = _pair(TanhMlp, (3, 6))
    trace = tl.trace(model, x, capture=CaptureOptions(backward_ready=True))
    path = str(tmp_path / "ready.tlspec")
    trace.save(path)
    loaded = tl.load(path)
    assert not loaded.has_backward_pass and loaded.saved_grad_ops == []
    assert len(loaded.backward_graph) == len(trace.backward_graph) > 0


def test_the_summary_lists_each_grad_fn():
    trace = _backward_trace()
    table = trace.summary()
    graph = trace.backward_graph
    counts = f"{len(graph)} grad_fns, {len(graph.edges)} edges, {len(trace.saved_grad_ops)} saved"
    assert f"backward: 1 pass, {counts}" in table
    relu = next(node for node in trace.grad_fns if node.class_name == "ReluBackward0")
    row = next(line for line in table.splitlines() if line.startswith(relu.label + " "))
    assert "ReluBackward0" in row and "relu_1_3" in row and "yes" in row


def _drawn(svg: str):
    """The nodes (label, ops) and edges (from label, to label) of a drawing."""
    nodes = re.findall(r'<g class="node [^"]*" data-id="(\d+)" data-ops="([^"]*)"[^>]*><title>([^\n<]*)', svg)
    labels = {int(index): label for index, _ops, label in nodes}
    ops = {label: [int(op) for op in found.split()] for _index, found, label in nodes}
    edges = {
        (labels[int(a)], labels[int(b)]) for a, b in re.findall(r'data-from="(\d+)" data-to="(\d+)"', svg)
    }
    return [label for _index, _ops, label in nodes], ops, edges


def test_the_backward_drawing_has_a_node_per_grad_fn_and_an_edge_per_gradient(tmp_path):
    trace = _backward_trace()
    labels, ops, edges = _drawn(trace.draw(backward=True).svg)
    assert labels == [node.label for node in trace.grad_fns]
    assert edges == set(trace.backward_graph.edges)
    for node in trace.grad_fns:
        assert ops[node.label] == ([trace[node.op_label].index] if node.has_op else [])
    # The forward drawing is unchanged by it, and a loaded trace draws the same backward graph.
    forward_labels, _, _ = _drawn(trace.draw().svg)
    assert forward_labels == trace.labels
    path = str(tmp_path / "drawn.tlspec")
    trace.save(path)
    assert _drawn(tl.load(path).draw(backward=True).svg) == (labels, ops, edges)


def test_drawing_a_backward_graph_that_was_not_captured_refuses():
    model, _, x = _pair(TanhMlp, (3, 6))
    with pytest.raises(NotFoundError) as caught:
        tl.trace(model, x).draw(backward=True)
    assert caught.value.code == "layout_no_backward"
