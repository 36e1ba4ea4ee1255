"""The MLX backend on real MLX: the spec's example, a battery of models whose recorded values
equal an independent recomputation, modules, routing, save=, .tlspec, refusals, live edits."""

from __future__ import annotations

import os

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")

import torchlens as tl  # noqa: E402
from conformance.models.mlx import SCALE, Mlp, SharedLayers, battery, with_constant  # noqa: E402
from torchlens.errors import BackendUnsupportedError  # noqa: E402

pytestmark = pytest.mark.mlx

KINDS = ("input", "output", "constant", "buffer")


def close(a, b, tol=1e-5):
    return np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol)


def seeded(model):
    mx.random.seed(0)
    return model


def recompute(trace):
    """Every op recomputed independently from its parents' saved values (not through replay)."""
    runtime = trace._runtime
    for op in trace.ops:
        value_id = op._info.get("value")
        record = runtime.records.get(value_id)
        if record is None or record.call is None:
            continue
        from torchlens.adapter_kit.replay import ParamRef, ValueRef

        def fill(item):
            if isinstance(item, ParamRef):
                return runtime.params[item.value]
            if isinstance(item, ValueRef):
                return runtime.values[item.value]
            if isinstance(item, (list, tuple)):
                return type(item)(fill(part) for part in item)
            return item

        result = record.call(*fill(record.args), **{k: fill(v) for k, v in record.kwargs.items()})
        if record.output_index is not None:
            result = result[record.output_index]
        assert close(result, op.out), op.label


@pytest.mark.parametrize("name", sorted(battery()))
def test_battery_values_equal_recomputation_and_validate(name):
    model, args = battery()[name]
    trace = tl.trace(model, args, backend="mlx")
    expected = model(*args)
    assert close(trace.outputs[0].out, expected)
    recompute(trace)
    assert trace.validate_forward_pass(None) is True
    assert trace.capture_verified
    if name == "cnn":
        # nn.MaxPool2d keeps mx.max as an attribute: it is still a wrapped op.
        assert "max" in [op.func_name for op in trace.ops]


def test_spec_example_capture_and_summary():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = mx.ones((1, 3))
    trace = tl.trace(model, x, backend="mlx")
    assert isinstance(trace.summary(), str)
    assert [op.func_name for op in trace.ops if op.kind not in KINDS] == ["T", "addmm", "relu", "T", "addmm"]


def test_operators_methods_and_transpose_are_captured():
    def fn(v):
        return (v + v)[0].sum() * v.T.mean()

    trace = tl.trace(fn, mx.ones((2, 3)), backend="mlx")
    names = [op.func_name for op in trace.ops if op.kind not in KINDS]
    assert names == ["add", "getitem", "sum", "T", "mean", "mul"]


def test_modules_aliases_and_list_containers():
    model = SharedLayers()
    trace = tl.trace(model, mx.ones((2, 4)), backend="mlx")
    modules = trace.modules
    assert "layers" in modules and "layers.0" in modules and "layers.1" in modules
    assert "alias" not in modules
    assert modules["layers.0"].all_addresses == ["layers.0", "alias"]
    assert modules["layers"].is_container
    assert sorted(modules["layers.0"].params) == ["layers.0.bias", "layers.0.weight"]
    assert trace.options.module_identity_mode == "object_module"
    assert modules["layers.0"].num_calls == 2
    root_only = tl.trace(
        model,
        mx.ones((2, 4)),
        backend="mlx",
        capture=tl.options.CaptureOptions(module_identity_mode="function_root"),
    )
    assert list(root_only.modules) == ["self"]
    assert root_only.capture_verified
    assert sorted(root_only.params) == [
        "layers.0.bias",
        "layers.0.weight",
        "layers.1.bias",
        "layers.1.weight",
    ]
    assert root_only.validate_forward_pass(None) is True


def test_constant_is_a_parentless_parent():
    trace = tl.trace(with_constant, mx.ones((2, 4)), backend="mlx")
    constants = [op for op in trace.ops if op.kind == "constant"]
    assert len(constants) == 1 and not constants[0].parents
    assert close(constants[0].out, SCALE)
    mul = next(op for op in trace.ops if op.func_name == "mul")
    assert constants[0].label in [parent.label for parent in mul.parents]


def test_routing_of_modules_and_functions():
    assert tl.trace(Mlp(), mx.ones((1, 3))).backend == "mlx"
    assert tl.trace(lambda a: a * 2, mx.ones(2)).backend == "mlx"


def test_realize_once_and_rng_refused_before_drawing():
    def noisy(x):
        return x + mx.random.normal(x.shape)

    mx.random.seed(3)
    before = mx.random.state[0] if hasattr(mx.random, "state") else None
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(noisy, mx.ones(3), backend="mlx")
    assert caught.value.code == "rng_state_in_graph"
    if before is not None:
        assert close(mx.random.state[0], before)
    dropout = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    dropout.train()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(dropout, mx.ones((1, 2)), backend="mlx")
    assert caught.value.code == "rng_state_in_graph"


def test_unwrapped_array_ceilings_or_refuses():
    def builds(x):
        return x + mx.array([1.0, 2.0])

    with pytest.warns(Warning):
        trace = tl.trace(builds, mx.ones(2), backend="mlx")
    assert trace.capture_verified is False
    assert "unwrapped_op_in_capture" in trace.capture_reason
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            builds,
            mx.ones(2),
            backend="mlx",
            capture=tl.options.CaptureOptions(extra={"mlx_on_unwrapped_op": "refuse"}),
        )
    assert caught.value.code == "unwrapped_op_in_capture"


def test_transforms_refuse_at_entry_and_compiled_attribute_ceilings():
    for transform in (mx.compile, mx.grad, mx.vmap):
        calls = []

        def fn(x, calls=calls):
            calls.append(1)
            return (x * x).sum()

        with pytest.raises(BackendUnsupportedError) as caught:
            tl.trace(transform(fn), mx.ones(3), backend="mlx")
        assert caught.value.code == "mlx_transform_at_entry"
        assert calls == []

    class WithCompiled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.act = mx.compile(lambda h: mx.tanh(h) * 2)

        def __call__(self, x):
            return self.act(self.fc(x))

    with pytest.warns(Warning):
        trace = tl.trace(WithCompiled(), mx.ones((1, 2)), backend="mlx")
    assert trace.capture_verified is False
    assert "mlx_compiled_attribute_not_logged" in trace.capture_reason


def test_static_save_keeps_live_arrays_and_tlspec_round_trips(tmp_path):
    model, (x,) = battery()["mlp"]
    trace = tl.trace(model, x, backend="mlx", save=tl.func("relu") | tl.module("fc2"))
    kept = [op.label for op in trace.ops if op.saved and op.kind not in KINDS]
    assert sorted(kept) == sorted(
        op.label
        for op in trace.ops
        if op.func_name == "relu" or op.module.startswith("fc2") and op.func_name == "addmm"
    )
    relu = next(op for op in trace.ops if op.func_name == "relu")
    assert isinstance(relu.out, mx.array)
    path = os.path.join(tmp_path, "t.tlspec")
    full = tl.trace(model, x.astype(mx.bfloat16), backend="mlx")
    full.save(path)
    loaded = tl.load(path)
    for op in full.ops:
        if op.saved:
            back = loaded.ops[op.index].out
            assert isinstance(back, mx.array) and back.dtype == op.out.dtype
            assert close(back.astype(mx.float32), op.out.astype(mx.float32))
    assert loaded.validation_replay_status.state == "unavailable"


REFUSALS = {
    "where": lambda m, x: tl.trace(
        m, x, backend="mlx", intervene=tl.when(tl.where(lambda op: True), tl.zero_ablate())
    ),
    "followed_by": lambda m, x: tl.trace(
        m, x, backend="mlx", stop_after=tl.followed_by(tl.func("relu"), tl.func("addmm"))
    ),
    "mixed": lambda m, x: tl.trace(
        m, x, backend="mlx", intervene=tl.when(tl.module("fc1") | tl.func("relu"), tl.zero_ablate())
    ),
    "backward": lambda m, x: tl.trace(
        m, x, backend="mlx", intervene=tl.when(tl.func("relu"), tl.zero_ablate(), direction="backward")
    ),
    "streaming": lambda m, x: tl.trace(
        m, x, backend="mlx", streaming=tl.StreamingOptions(path="refused.tlspec")
    ),
    "save_grads": lambda m, x: tl.trace(
        m, x, backend="mlx", capture=tl.options.CaptureOptions(extra={"save_grads": True})
    ),
    "backward_ready": lambda m, x: tl.trace(
        m, x, backend="mlx", capture=tl.options.CaptureOptions(extra={"backward_ready": True})
    ),
    "record": lambda m, x: tl.record(m, x, backend="mlx"),
    "value_save": lambda m, x: tl.trace(m, x, backend="mlx", save=tl.where(lambda op: True)),
}


class Counting(Mlp):
    calls = 0

    def __call__(self, x):
        type(self).calls += 1
        return super().__call__(x)


CODES = {
    "backward": "gradient_site_intervention_unsupported",
    # The gate's code for the capability, the same as options.backward_ready=True gets.
    "backward_ready": "backward_ready_unsupported",
    "followed_by": "followed_by_unsupported",
    "mixed": "mixed_module_selector",
    "where": "value_dependent_predicate",
    "record": "capability_unsupported",
    "save_grads": "save_grads_unsupported",
    "streaming": "streaming_unsupported",
    "value_save": "value_dependent_save_unsupported",
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_fire_before_the_forward(case):
    Counting.calls = 0
    with pytest.raises(BackendUnsupportedError) as caught:
        REFUSALS[case](Counting(), mx.ones((1, 3)))
    assert caught.value.code == CODES[case]
    assert caught.value.code in tl.backends.REFUSAL_CODES
    assert caught.value.remedy
    assert Counting.calls == 0


def test_fork_refuses_naming_mlx():
    trace = tl.trace(Mlp(), mx.ones((1, 3)), backend="mlx")
    with pytest.raises(BackendUnsupportedError) as caught:
        trace.fork()
    assert caught.value.code == "capability_unsupported"
    assert "mlx" in str(caught.value)


def test_capture_leaves_nothing_installed():
    add = mx.array.__add__
    func = mx.add
    with pytest.raises(ZeroDivisionError):
        tl.trace(lambda x: (x + 1, 1 / 0), mx.ones(2), backend="mlx")
    assert mx.array.__add__ is add and mx.add is func


def test_in_place_ops_keep_the_old_value():
    def fn(x):
        y = x * 2
        y += 1
        y[0] = 10.0
        return y

    x = mx.array([1.0, 2.0, 3.0])
    trace = tl.trace(fn, x, backend="mlx")
    values = {op.func_name: np.array(op.out).tolist() for op in trace.ops if op.kind not in KINDS}
    assert values == {"mul": [2.0, 4.0, 6.0], "add": [3.0, 5.0, 7.0], "setitem": [10.0, 5.0, 7.0]}
    assert trace.validate_forward_pass(None) is True


DOUBLE = mx.vmap(lambda row: row * 2.0)


def test_transform_read_as_a_global_is_one_op_and_ceilings():
    def fn(x):
        return DOUBLE(x + 1.0).sum()

    with pytest.warns(Warning):
        trace = tl.trace(fn, mx.ones((2, 3)), backend="mlx")
    assert [op.func_name for op in trace.ops if op.kind not in KINDS] == ["add", "DOUBLE", "sum"]
    assert trace.capture_verified is False
    assert "mlx_compiled_attribute_not_logged" in trace.capture_reason
    assert close(trace.outputs[0].out, fn(mx.ones((2, 3))))
    assert trace.validate_forward_pass(None) is True


OLD_MLX = tuple(int(part) for part in mx.__version__.split(".")[:2]) < (0, 27)


def test_transform_held_in_a_closure_is_one_op_or_refuses_on_0_26():
    triple = mx.vmap(lambda row: row * 3.0)

    def fn(x):
        return triple(x + 1.0).sum()

    if OLD_MLX:
        # 0.26's transformed functions cannot be hooked at their type: the tracers recorded
        # inside refuse at realize, never a silent wrong trace.
        with pytest.raises(BackendUnsupportedError) as caught:
            tl.trace(fn, mx.ones((2, 3)), backend="mlx")
        assert caught.value.code == "mlx_transform_at_entry"
        return
    with pytest.warns(Warning):
        trace = tl.trace(fn, mx.ones((2, 3)), backend="mlx")
    assert [op.func_name for op in trace.ops if op.kind not in KINDS] == ["add", "transformed", "sum"]
    assert "mlx_compiled_attribute_not_logged" in trace.capture_reason
    assert trace.validate_forward_pass(None) is True


def test_iterating_an_array_records_getitem_per_row():
    def fn(x):
        total = mx.zeros((3,))
        for row in x:
            total = total + row
        return total

    x = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    trace = tl.trace(fn, x, backend="mlx")
    assert trace.capture_verified
    assert [op.func_name for op in trace.ops if op.kind not in KINDS] == [
        "zeros",
        "getitem",
        "add",
        "getitem",
        "add",
    ]
    assert close(trace.outputs[0].out, fn(x))
    assert trace.validate_forward_pass(None) is True


def test_mlp_values_equal_a_hand_computation():
    model, (x,) = battery()["mlp"]
    trace = tl.trace(model, x, backend="mlx")
    ops = {op.func_name + str(i): op for i, op in enumerate(trace.ops)}
    values = [np.array(op.out) for op in trace.ops if op.kind not in KINDS]
    w1, b1 = np.array(model.fc1.weight), np.array(model.fc1.bias)
    w2, b2 = np.array(model.fc2.weight), np.array(model.fc2.bias)
    h = np.array(x) @ w1.T + b1
    expected = [w1.T, h, np.maximum(h, 0), w2.T, np.maximum(h, 0) @ w2.T + b2]
    assert len(values) == len(expected) and ops
    for got, want in zip(values, expected):
        assert np.allclose(got, want, atol=1e-5)


def test_a_tampered_saved_value_fails_validation_naming_the_op():
    model, (x,) = battery()["mlp"]
    trace = tl.trace(model, x, backend="mlx")
    relu = next(op for op in trace.ops if op.func_name == "relu")
    value_id = relu._info["value"]
    trace._runtime.values[value_id] = relu.out + 1.0
    status = trace.validation_replay_status
    assert status.state == "failed"
    assert status.first_failed_op == relu.label


def test_modules_in_a_dict_and_a_tuple_keep_their_addresses():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = {"left": nn.Linear(2, 2), "right": nn.Linear(2, 2)}
            self.pair = (nn.Linear(2, 2), nn.Linear(2, 2))

        def __call__(self, x):
            y = self.heads["left"](x) + self.heads["right"](x)
            return self.pair[1](self.pair[0](y))

    trace = tl.trace(Holder(), mx.ones((1, 2)), backend="mlx")
    modules = trace.modules
    for address in ("heads", "heads.left", "heads.right", "pair", "pair.0", "pair.1"):
        assert address in modules, address
    assert modules["heads"].is_container and modules["pair"].is_container
    assert modules["heads.left"].num_calls == 1
    assert trace.validate_forward_pass(None) is True


def test_realize_once_is_one_mx_eval_per_capture(monkeypatch):
    calls = []
    evaluate = mx.eval

    def counting(*args, **kwargs):
        calls.append(len(args))
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(mx, "eval", counting)
    model, (x,) = battery()["block"]
    trace = tl.trace(model, x, backend="mlx")
    assert len(calls) == 1 and calls[0] >= len(trace.ops) - 2
    calls.clear()
    tl.trace(model, x, backend="mlx", intervene=tl.when(tl.func("relu") | tl.func("gelu"), tl.scale(0.5)))
    assert len(calls) == 1


def layers():
    mx.random.seed(0)
    return {
        "embedding": (nn.Embedding(10, 4), (mx.array([[1, 2, 3]]),)),
        "rmsnorm": (nn.RMSNorm(4), (mx.random.normal((2, 4)),)),
        "rope": (nn.RoPE(4), (mx.random.normal((1, 3, 4)),)),
        "gru": (nn.GRU(4, 3), (mx.random.normal((1, 5, 4)),)),
        "batchnorm": (nn.BatchNorm(4), (mx.random.normal((3, 4)),)),
        "encoder": (nn.TransformerEncoderLayer(8, 2, 16), (mx.random.normal((1, 5, 8)), None)),
        "groupnorm": (nn.GroupNorm(2, 4), (mx.random.normal((1, 3, 3, 4)),)),
        "dropout_eval": (nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)), (mx.random.normal((2, 4)),)),
    }


@pytest.mark.parametrize("name", sorted(layers()))
def test_mlx_nn_layers_capture_verified_and_validate(name):
    model, args = layers()[name]
    model.eval()
    trace = tl.trace(model, args, backend="mlx")
    assert trace.capture_verified
    assert close(trace.outputs[0].out, model(*args))
    assert trace.validate_forward_pass(None) is True


SHIFT = mx.array([1.0, -1.0])


def test_class_level_and_default_argument_arrays_are_constants():
    class Scaled(nn.Module):
        SCALE = mx.array([2.0, 3.0])

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def __call__(self, x, shift=SHIFT):
            return self.fc(x) * self.SCALE + shift

    trace = tl.trace(Scaled(), mx.ones((1, 2)), backend="mlx")
    assert trace.capture_verified
    assert len([op for op in trace.ops if op.kind == "constant"]) == 2
    assert trace.validate_forward_pass(None) is True
