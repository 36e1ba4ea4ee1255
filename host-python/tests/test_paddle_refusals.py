"""Every Paddle refusal: a typed ``BackendUnsupportedError`` whose code is in REFUSAL_CODES,
raised before the refused call has any effect. After each refusal no capture session is open,
every wrapper is gone, no tensor was written and the random-number state is where it was."""

from __future__ import annotations

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

import paddle.nn.functional as F  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.paddle import Cnn, Counting, DropoutTraining, InPlace  # noqa: E402
from torchlens.adapter_kit.session import open_session_count  # noqa: E402
from torchlens.errors import BackendUnsupportedError  # noqa: E402
from torchlens.options import CaptureOptions  # noqa: E402

pytestmark = pytest.mark.paddle


def _x():
    return paddle.to_tensor([[1.0, -2.0, 3.0]])


def _writes_input(x):
    x.add_(paddle.ones_like(x))
    return x * 2


def _setitem(x):
    y = x * 2
    y[0, 0] = 5.0
    return y


def _relu_in_place(x):
    return F.relu_(x * 2)


def _draws(x):
    return x + paddle.rand(x.shape)


def _dropout_training(x):
    return F.dropout(x, 0.5, training=True)


def _item(x):
    return x * (x * 2).sum().item()


def _branches(x):
    if (x * 2).sum() > 0:
        return x + 1
    return x - 1


def _numpy(x):
    return x * float((x * 2).numpy().sum())


def _training_model(model):
    def run():
        return tl.trace(model.train(), paddle.ones([2, 2, 5, 5]), backend="paddle")

    return run


# Built once here: building a layer draws its initial weights from Paddle's generator.
IN_PLACE = InPlace()
DROPOUT = DropoutTraining().train()


def _trace(fn, **keywords):
    return tl.trace(fn, _x(), backend="paddle", **keywords)


#: Refusal code → calls that must raise it inside the forward (each run in a fresh state).
PADDLE_TRIGGERS = {
    "paddle_in_place_mutation": [
        lambda: _trace(_writes_input),
        lambda: _trace(_setitem),
        lambda: _trace(_relu_in_place),
        lambda: tl.trace(IN_PLACE, paddle.ones([1, 6]), backend="paddle"),
        _training_model(Cnn()),
    ],
    "rng_state_in_graph": [
        lambda: _trace(_draws),
        lambda: _trace(_dropout_training),
        lambda: tl.trace(DROPOUT, paddle.ones([1, 6]), backend="paddle"),
    ],
    "paddle_value_escape": [lambda: _trace(_item), lambda: _trace(_branches), lambda: _trace(_numpy)],
}

#: Paddle codes refused before the model runs, each triggered by a test of its own (file, test).
TRIGGERED_ELSEWHERE = {
    "paddle_static_graph": ("test_paddle_refusals.py", "test_a_static_graph_root_refuses_before_it_runs"),
    "paddle_import_order": (
        "test_paddle_capture.py",
        "test_routing_never_imports_paddle_and_refuses_after_tensorflow",
    ),
    "gradient_site_intervention_unsupported": (
        "test_paddle_edits.py",
        "test_gradient_site_interventions_refuse",
    ),
    "edit_action_unsupported": (
        "test_paddle_edits.py",
        "test_unsupported_edit_requests_refuse_before_the_model_runs",
    ),
    "mixed_module_selector": (
        "test_paddle_edits.py",
        "test_unsupported_edit_requests_refuse_before_the_model_runs",
    ),
}

#: Capability and option refusals at the door, each with a Counting() whose calls must stay 0.
DOOR_TRIGGERS = {
    "value_dependent_save_unsupported": lambda m: tl.trace(m, _x(), save=tl.where(lambda op: True)),
    "followed_by_unsupported": lambda m: tl.trace(
        m, _x(), save=tl.followed_by(tl.func("linear"), tl.func("relu"))
    ),
    "streaming_unsupported": lambda m: tl.trace(m, _x(), streaming=tl.StreamingOptions("refused.tlspec")),
    "save_grads_unsupported": lambda m: tl.trace(m, _x(), capture=CaptureOptions(extra={"save_grads": True})),
    "capability_unsupported": lambda m: tl.record(m, _x(), backend="paddle"),
    "option_unsupported": lambda m: tl.trace(
        m, _x(), backend="paddle", capture=CaptureOptions(module_identity_mode="pytree_module")
    ),
    "option_value_invalid": lambda m: tl.trace(
        m,
        _x(),
        backend="paddle",
        capture=CaptureOptions(grad_options=tl.backends.paddle.GradOptions(input_grad_argnums=(3,))),
    ),
}


def _surface():
    from paddle import _C_ops

    return (
        {name: id(getattr(_C_ops, name)) for name in dir(_C_ops)},
        dict(vars(paddle.Tensor)),
        paddle.nn.Layer.__call__,
    )


@pytest.mark.parametrize(
    "code,index",
    [(code, index) for code, calls in sorted(PADDLE_TRIGGERS.items()) for index in range(len(calls))],
)
def test_each_forward_refusal_fires_before_its_effect(code, index):
    paddle.seed(7)
    before = _surface()
    with pytest.raises(BackendUnsupportedError) as caught:
        PADDLE_TRIGGERS[code][index]()
    assert caught.value.code == code and caught.value.remedy
    assert caught.value.framework == "paddle"
    assert code in tl.backends.REFUSAL_CODES
    assert code in tl.backends.get_backend("paddle").refusal_codes
    assert open_session_count() == 0
    assert _surface() == before
    # The refused draw drew nothing: the next draw equals a draw from the fresh seed.
    after = paddle.rand([4]).numpy()
    paddle.seed(7)
    np.testing.assert_array_equal(after, paddle.rand([4]).numpy())


def test_a_refused_write_leaves_the_tensors_untouched():
    x = _x()
    with pytest.raises(BackendUnsupportedError):
        tl.trace(_writes_input, x, backend="paddle")
    np.testing.assert_array_equal(x.numpy(), [[1.0, -2.0, 3.0]])
    assert x._inplace_version() == 0
    cnn = Cnn()
    mean = cnn.bn._mean.numpy().copy()
    with pytest.raises(BackendUnsupportedError) as caught:
        _training_model(cnn)()
    assert "model.eval()" in caught.value.remedy
    np.testing.assert_array_equal(cnn.bn._mean.numpy(), mean)


@pytest.mark.parametrize("code", sorted(DOOR_TRIGGERS))
def test_each_door_refusal_fires_before_the_model_runs(code):
    model = Counting()
    with pytest.raises(BackendUnsupportedError) as caught:
        DOOR_TRIGGERS[code](model)
    assert caught.value.code == code and caught.value.remedy
    assert code in tl.backends.REFUSAL_CODES
    assert model.calls == 0
    assert open_session_count() == 0


def test_editing_a_finished_trace_refuses_and_names_the_framework():
    trace = tl.trace(Counting(), _x(), backend="paddle")
    with pytest.raises(BackendUnsupportedError) as caught:
        trace.fork()
    assert caught.value.code == "capability_unsupported" and caught.value.framework == "paddle"


def test_a_static_graph_root_refuses_before_it_runs():
    calls = []

    def fn(x):
        calls.append(x)
        return x * 2

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(paddle.jit.to_static(fn), _x(), backend="paddle")
    assert caught.value.code == "paddle_static_graph" and "dygraph" in caught.value.message
    assert not calls


def test_object_module_on_a_plain_function_refuses_before_it_runs():
    calls = []

    def plain(x):
        calls.append(x)
        return x * 2

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(plain, _x(), backend="paddle", capture=CaptureOptions(module_identity_mode="object_module"))
    assert caught.value.code == "option_unsupported" and not calls


def test_foreign_grad_options_refuse_before_the_model_runs():
    model = Counting()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, _x(), backend="paddle", capture=CaptureOptions(grad_options=object()))
    assert caught.value.code == "option_unsupported" and model.calls == 0
