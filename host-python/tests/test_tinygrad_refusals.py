"""Every tinygrad refusal: a typed ``BackendUnsupportedError`` whose code is in REFUSAL_CODES,
raised before the refused call has any effect. After each refusal no capture session is open,
every wrapper is gone (tinygrad's ``Tensor`` is exactly as it was), the input is still lazy
(nothing was realized) and the random-number state is where it was."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

import tinygrad.nn as nn  # noqa: E402
from tinygrad import Tensor, TinyJit  # noqa: E402

import torchlens as tl  # noqa: E402
from torchlens.adapter_kit.session import open_session_count  # noqa: E402
from torchlens.errors import BackendUnsupportedError  # noqa: E402
from torchlens.options import CaptureOptions  # noqa: E402

pytestmark = pytest.mark.tinygrad


class Model:
    def __init__(self):
        self.fc = nn.Linear(3, 2)
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return self.fc(x).relu()


def _realizes(x):
    return (x * 2).realize() + 1


def _reads(x):
    return x * float((x * 2).sum().numpy())


def _assigns(x):
    y = x * 2
    y.assign(x + 1)
    return y


def _replaces(x):
    x.replace(x * 2)
    return x + 1


def _setitem(x):
    x[0] = 5.0
    return x * 2


def _draws(x):
    return x + Tensor.rand(*x.shape)


def _dropout(x):
    # training mode: Tensor.training on tinygrad 0.13, the TRAINING context variable on 0.14
    from tinygrad import helpers

    previous = getattr(Tensor, "training", None)
    Tensor.training = True
    try:
        if hasattr(helpers, "TRAINING"):
            with helpers.Context(TRAINING=1):
                return x.dropout(0.5)
        return x.dropout(0.5)
    finally:
        if previous is None:
            del Tensor.training
        else:
            Tensor.training = previous


@TinyJit
def _jitted(x):
    return (x * 2).realize()


def _runs_jit(x):
    return _jitted(x) + 1


def _trace(fn, **keywords):
    return tl.trace(fn, Tensor([[1.0, -2.0, 3.0]]), backend="tinygrad", **keywords)


#: Refusal code → calls that must raise it (each run in a fresh state by the tests below).
TINYGRAD_TRIGGERS = {
    "tinygrad_mid_capture_realize": [lambda: _trace(_realizes), lambda: _trace(_reads)],
    "tinygrad_assign": [lambda: _trace(_assigns), lambda: _trace(_replaces), lambda: _trace(_setitem)],
    "tinyjit_execution": [lambda: _trace(_runs_jit), lambda: _trace(_jitted)],
    "rng_state_in_graph": [lambda: _trace(_draws), lambda: _trace(_dropout)],
}

#: Capability and option refusals of the door, each with a Model() whose calls must stay 0.
DOOR_TRIGGERS = {
    "intervene_unsupported": lambda m: tl.trace(
        m, Tensor.ones(1, 3), intervene=tl.when(tl.func("add"), tl.zero_ablate())
    ),
    "stop_after_unsupported": lambda m: tl.trace(m, Tensor.ones(1, 3), stop_after=tl.func("add")),
    "value_dependent_save_unsupported": lambda m: tl.trace(
        m, Tensor.ones(1, 3), save=tl.where(lambda op: True)
    ),
    "followed_by_unsupported": lambda m: tl.trace(
        m, Tensor.ones(1, 3), save=tl.followed_by(tl.func("add"), tl.func("where"))
    ),
    "streaming_unsupported": lambda m: tl.trace(
        m, Tensor.ones(1, 3), streaming=tl.StreamingOptions(path="refused.tlspec")
    ),
    "save_grads_unsupported": lambda m: tl.trace(
        m, Tensor.ones(1, 3), capture=CaptureOptions(extra={"save_grads": True})
    ),
    "capability_unsupported": lambda m: tl.record(m, Tensor.ones(1, 3), backend="tinygrad"),
    "option_unsupported": lambda m: tl.trace(
        m, Tensor.ones(1, 3), backend="tinygrad", capture=CaptureOptions(module_identity_mode="pytree_module")
    ),
}


def _tensor_namespace():
    return {name: value for name, value in vars(Tensor).items()}


@pytest.mark.parametrize(
    "code,index",
    [(code, index) for code, calls in sorted(TINYGRAD_TRIGGERS.items()) for index in range(len(calls))],
)
def test_each_forward_refusal_fires_before_its_effect(code, index):
    Tensor.manual_seed(7)
    before = _tensor_namespace()
    with pytest.raises(BackendUnsupportedError) as caught:
        TINYGRAD_TRIGGERS[code][index]()
    assert caught.value.code == code and caught.value.remedy
    assert caught.value.framework == "tinygrad"
    assert code in tl.backends.REFUSAL_CODES
    assert code in tl.backends.get_backend("tinygrad").refusal_codes
    assert open_session_count() == 0
    assert _tensor_namespace() == before
    # The refused draw drew nothing: the next draw equals a draw from the fresh seed.
    after = Tensor.rand(4).numpy()
    Tensor.manual_seed(7)
    np.testing.assert_array_equal(after, Tensor.rand(4).numpy())


def test_a_refused_mutation_leaves_the_input_untouched_and_lazy():
    x = Tensor([[1.0, -2.0, 3.0]]) * 1.0
    lazy = x.uop
    for fn in (_assigns, _replaces, _setitem, _realizes):
        with pytest.raises(BackendUnsupportedError):
            tl.trace(fn, x, backend="tinygrad")
    assert x.uop is lazy and not x.uop.is_realized
    np.testing.assert_array_equal(x.numpy(), [[1.0, -2.0, 3.0]])


@pytest.mark.parametrize("code", sorted(DOOR_TRIGGERS))
def test_each_door_refusal_fires_before_the_model_runs(code):
    model = Model()
    with pytest.raises(BackendUnsupportedError) as caught:
        DOOR_TRIGGERS[code](model)
    assert caught.value.code == code and caught.value.remedy
    assert code in tl.backends.REFUSAL_CODES
    assert model.calls == 0
    assert open_session_count() == 0


def test_editing_a_finished_trace_refuses_and_names_the_framework():
    trace = tl.trace(Model(), Tensor.ones(1, 3), backend="tinygrad")
    with pytest.raises(BackendUnsupportedError) as caught:
        trace.fork()
    assert caught.value.code == "capability_unsupported" and caught.value.framework == "tinygrad"


def test_object_module_on_a_plain_function_refuses_before_it_runs():
    calls = []

    def plain(x):
        calls.append(x)
        return x * 2

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            plain,
            Tensor.ones(3),
            backend="tinygrad",
            capture=CaptureOptions(module_identity_mode="object_module"),
        )
    assert caught.value.code == "option_unsupported" and not calls


def test_foreign_grad_options_refuse_before_the_model_runs():
    model = Model()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, Tensor.ones(1, 3), backend="tinygrad", capture=CaptureOptions(grad_options=object()))
    assert caught.value.code == "option_unsupported" and model.calls == 0
