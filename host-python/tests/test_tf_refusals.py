"""What the TensorFlow backend refuses, each with a registered code and a remedy: the doors
(capabilities TensorFlow's read-only op callbacks cannot serve, graph-only entries, unbuilt Keras
models, options) refuse before the model runs; a variable write or a random draw inside the
forward refuses before anything changes: seen by the pre-run graph trace, or, where the forward
cannot be traced, by the guard as the op is called.

TensorFlow is imported inside the fixtures, never at collection (see test_tf_capture.py)."""

from __future__ import annotations

import numpy as np
import pytest

import torchlens as tl
from torchlens.adapter_kit.session import open_session_count
from torchlens.errors import BackendUnsupportedError
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


class _Counting:
    """A built Keras model that counts its calls (to show a refusal came before it ran)."""

    def __init__(self, tf):
        import keras

        class Model(keras.Model):
            def __init__(self):
                super().__init__()
                self.fc = keras.layers.Dense(3)
                self.calls = 0

            def call(self, x):
                self.calls += 1
                return tf.nn.relu(self.fc(x))

        self.model = Model()
        self.x = tf.ones((1, 3))
        self.model(self.x)
        self.model.calls = 0


DOOR_TRIGGERS = {
    "stop_after_unsupported": lambda m, x: tl.trace(m, x, backend="tf", stop_after=tl.func("relu")),
    "value_dependent_save_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", save=tl.where(lambda op: True)
    ),
    "followed_by_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", save=tl.followed_by(tl.func("matmul"), tl.func("relu"))
    ),
    # intervene= on a graph-only entry (the frozen graph cannot be edited).
    "tf_graph_only_intervene": lambda m, x: tl.trace(
        _tf().function(m), x, backend="tf", intervene=tl.when(tl.func("relu"), tl.zero_ablate())
    ),
    "streaming_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", streaming=tl.StreamingOptions(path="refused.tlspec")
    ),
    "save_grads_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", capture=CaptureOptions(extra={"save_grads": True})
    ),
    "backward_ready_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", capture=CaptureOptions(backward_ready=True)
    ),
    "option_unsupported": lambda m, x: tl.trace(
        m, x, backend="tf", capture=CaptureOptions(module_identity_mode="pytree_module")
    ),
}


@pytest.mark.parametrize("code", sorted(DOOR_TRIGGERS))
def test_each_door_refusal_fires_before_the_model_runs(tf, code):
    counting = _Counting(tf)
    with pytest.raises(BackendUnsupportedError) as caught:
        DOOR_TRIGGERS[code](counting.model, counting.x)
    assert caught.value.code == code and caught.value.remedy
    assert code in tl.backends.REFUSAL_CODES
    assert counting.model.calls == 0
    assert open_session_count() == 0


def _tf():
    import tensorflow

    return tensorflow


def test_foreign_grad_options_refuse_before_the_model_runs(tf):
    counting = _Counting(tf)
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(counting.model, counting.x, backend="tf", capture=CaptureOptions(grad_options=object()))
    assert caught.value.code == "option_unsupported" and "GradOptions" in caught.value.remedy
    assert counting.model.calls == 0


def test_an_unbuilt_keras_model_it_cannot_build_refuses_before_it_builds(tf):
    import keras

    class TwoInputs(keras.Model):
        def __init__(self):
            super().__init__()
            self.fc = keras.layers.Dense(3)

        def call(self, a, b):
            return self.fc(a) + b

    model = TwoInputs()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, (tf.ones((1, 2)), tf.ones((1, 3))), backend="tf")
    assert caught.value.code == "tf_keras_unbuildable" and "build" in caught.value.remedy
    assert not model.fc.built and not model.weights


def test_graph_only_entries_refuse_edits_and_object_module_before_they_run(tf):
    calls = []

    @tf.function
    def fn(x):
        calls.append(x)
        return tf.nn.relu(x * 2.0)

    x = tf.ones((2,))
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(fn, x, backend="tf", intervene=tl.when(tl.func("relu"), tl.zero_ablate()))
    assert caught.value.code == "tf_graph_only_intervene" and "graph-only" in caught.value.message
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(fn, x, backend="tf", capture=CaptureOptions(module_identity_mode="object_module"))
    assert caught.value.code == "option_unsupported"
    assert not calls
    assert open_session_count() == 0


def test_object_module_on_a_plain_function_refuses_before_it_runs(tf):
    calls = []

    def plain(x):
        calls.append(x)
        return x * 2.0

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(
            plain, tf.ones((2,)), backend="tf", capture=CaptureOptions(module_identity_mode="object_module")
        )
    assert caught.value.code == "option_unsupported" and not calls


class _Writer:
    """``tf.Module`` roots that write a variable or draw random numbers in their forward, either
    in Python a graph trace can follow (the pre-run scan refuses them) or behind a value that
    leaves TensorFlow (``.numpy()``: not traceable, so the guard refuses the op as it is called).
    ``eager_calls`` counts forwards that started eagerly."""

    def __init__(self, tf, kind, traceable):
        self.variable = tf.Variable([1.0, 2.0])
        self.generator = tf.random.Generator.from_seed(7)
        variable, generator = self.variable, self.generator
        counts = self

        class Root(tf.Module):
            def __call__(self, x):
                if tf.executing_eagerly():
                    counts.eager_calls += 1
                if not traceable:
                    x = tf.constant(x.numpy())  # needs a value: a graph trace fails here
                if kind == "write":
                    variable.assign_add(x)
                elif kind == "raw":
                    tf.raw_ops.AssignAddVariableOp(resource=variable.handle, value=x)
                elif kind == "scatter":
                    variable.scatter_nd_update([[0]], [5.0])
                elif kind == "generator":
                    x = x + generator.normal(tf.shape(x))
                else:  # a global-seed draw
                    x = x + tf.random.normal(tf.shape(x))
                return x * 2.0

        self.eager_calls = 0
        self.root = Root()


@pytest.mark.parametrize("traceable", [True, False], ids=["prescan", "guard"])
@pytest.mark.parametrize(
    "kind, code, op_type",
    [
        ("write", "tf_variable_write", "AssignAddVariableOp"),
        ("raw", "tf_variable_write", "AssignAddVariableOp"),
        ("scatter", "tf_variable_write", "ResourceScatterNdUpdate"),
        ("generator", "rng_state_in_graph", "RngReadAndSkip"),
        ("global", "rng_state_in_graph", "RandomStandardNormal"),
    ],
)
def test_a_write_or_draw_in_a_tf_module_refuses_before_anything_changes(tf, kind, code, op_type, traceable):
    writer = _Writer(tf, kind, traceable)
    variable = writer.variable.numpy().copy()
    generator_state = writer.generator.state.numpy().copy()
    # The global seed's sequence: the draw after the refusal must be the first of the sequence.
    tf.random.set_seed(11)
    first_draw = tf.random.normal((3,)).numpy()
    tf.random.set_seed(11)
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(writer.root, tf.ones((2,)), backend="tf")
    assert caught.value.code == code and op_type in caught.value.message and caught.value.remedy
    where = "pre-run graph trace" if traceable else "refused before it ran"
    assert where in caught.value.message
    # The pre-run scan refuses before the eager forward starts; the guard while it runs, before
    # the op executes.
    assert writer.eager_calls == (0 if traceable else 1)
    np.testing.assert_array_equal(writer.variable.numpy(), variable)
    np.testing.assert_array_equal(writer.generator.state.numpy(), generator_state)
    np.testing.assert_array_equal(tf.random.normal((3,)).numpy(), first_draw)
    assert open_session_count() == 0


def test_a_plain_function_that_writes_refuses_before_it_runs(tf):
    counter = tf.Variable(0.0)
    calls = []

    def writes(x):
        if tf.executing_eagerly():
            calls.append(x)
        counter.assign_add(1.0)
        return x * 2.0

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(writes, tf.ones((2,)), backend="tf")
    assert caught.value.code == "tf_variable_write" and "variable" in caught.value.message
    assert counter.numpy() == 0.0 and not calls
    assert open_session_count() == 0


def test_a_write_inside_a_while_body_is_seen_by_the_pre_run_scan(tf):
    counter = tf.Variable(0.0)

    class Loop(tf.Module):
        def __call__(self, x):
            def body(i, acc):
                counter.assign_add(1.0)
                return i + 1, acc * 2.0

            return tf.while_loop(lambda i, acc: i < 3, body, (0, x))[1]

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(Loop(), tf.ones((2,)), backend="tf")
    assert caught.value.code == "tf_variable_write" and "pre-run graph trace" in caught.value.message
    assert counter.numpy() == 0.0


def test_a_traced_tf_function_called_in_an_untraceable_forward_is_scanned_before_it_runs(tf):
    counter = tf.Variable(0.0)

    @tf.function
    def inner(x):
        # The write sits in a branch (a function of its own, a child of the call).
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: counter.assign_add(1.0) * x, lambda: x)

    inner(tf.ones((2,)))  # traced before the capture: no Python of it runs during the forward
    counter.assign(0.0)

    def outer(x):
        return inner(tf.constant(x.numpy()))  # .numpy(): the pre-run trace falls back

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(outer, tf.ones((2,)), backend="tf")
    assert caught.value.code == "tf_variable_write" and "tf.function" in caught.value.message
    assert counter.numpy() == 0.0


def test_the_pre_run_scan_runs_once_per_callable_and_input_signature(tf):
    traced = []

    class Clean(tf.Module):
        def __call__(self, x):
            if not tf.executing_eagerly():
                traced.append(tuple(x.shape))
            return tf.nn.relu(x)

    root = Clean()
    first = tl.trace(root, tf.ones((2,)), backend="tf")
    tl.trace(root, -tf.ones((2,)), backend="tf")
    assert traced == [(2,)] and first.provenance.tf_prescan == "graph"
    tl.trace(root, tf.ones((3,)), backend="tf")
    assert traced == [(2,), (3,)]

    def untraceable(x):
        return tf.constant(x.numpy()) * 2.0

    trace = tl.trace(untraceable, tf.ones((2,)), backend="tf")
    assert trace.provenance.tf_prescan.startswith("fallback:")


def test_sparse_recording_refuses_before_the_model_runs(tf):
    counting = _Counting(tf)
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.record(counting.model, counting.x, backend="tf")
    assert caught.value.code == "capability_unsupported" and caught.value.remedy
    assert counting.model.calls == 0


def test_a_keras_model_on_another_keras_backend_refuses_before_it_runs():
    import importlib.util
    import subprocess
    import sys

    # Keras's NumPy backend imports JAX and SciPy; the pinned TensorFlow leg installs neither.
    missing = [name for name in ("jax", "scipy") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"Keras's NumPy backend needs {' and '.join(missing)}, not installed here")
    code = (
        "import os\n"
        "os.environ['KERAS_BACKEND'] = 'numpy'\n"
        "import tensorflow as tf, keras, torchlens as tl\n"
        "from torchlens.errors import BackendUnsupportedError\n"
        "model = keras.Sequential([keras.layers.Dense(2)])\n"
        "try:\n"
        "    tl.trace(model, tf.ones((1, 3)), backend='tf')\n"
        "except BackendUnsupportedError as error:\n"
        "    assert error.code == 'tf_keras_backend_mismatch' and 'KERAS_BACKEND' in error.remedy, error\n"
        "    assert not model.built\n"
        "else:\n"
        "    raise SystemExit('no refusal')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_editing_a_finished_trace_refuses_and_names_the_framework(tf):
    counting = _Counting(tf)
    trace = tl.trace(counting.model, counting.x, backend="tf")
    with pytest.raises(BackendUnsupportedError) as caught:
        trace.fork()
    assert caught.value.code == "capability_unsupported" and caught.value.framework == "tf"


def test_refusal_codes_are_registered(tf):
    codes = set(tl.backends.get_backend("tf").refusal_codes)
    assert {"tf_variable_write", "tf_keras_backend_mismatch", "rng_state_in_graph"} <= codes
    assert codes <= tl.backends.REFUSAL_CODES and "paddle_import_order" not in codes


def _keras_with(tf, layer):
    """A built Keras model around one layer that counts its calls."""
    import keras

    class Model(keras.Model):
        def __init__(self):
            super().__init__()
            self.fc = keras.layers.Dense(3)
            self.inner = layer
            self.calls = 0

        def call(self, x, training=False):
            self.calls += 1
            return self.inner(self.fc(x), training=training)

    model = Model()
    model(tf.ones((2, 3)))
    model.calls = 0
    return model


def test_a_batch_norm_training_call_refuses_before_the_model_runs(tf):
    import keras

    model = _keras_with(tf, keras.layers.BatchNormalization())
    moving_mean = model.inner.moving_mean.numpy().copy()
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, tf.ones((2, 3)), {"training": True}, backend="tf")
    assert caught.value.code == "tf_variable_write" and "moving statistics" in caught.value.message
    assert caught.value.remedy
    assert model.calls == 0
    np.testing.assert_array_equal(model.inner.moving_mean.numpy(), moving_mean)
    assert open_session_count() == 0
    # In inference mode the same model traces (batch norm reads its statistics).
    assert tl.trace(model, tf.ones((2, 3)), {"training": False}, backend="tf").validate_forward_pass() is True


def test_a_dropout_training_call_refuses_before_the_model_runs(tf):
    import keras

    model = _keras_with(tf, keras.layers.Dropout(0.5))
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(model, tf.ones((2, 3)), {"training": True}, backend="tf")
    assert caught.value.code == "rng_state_in_graph" and "Dropout" in caught.value.message
    assert model.calls == 0 and open_session_count() == 0


@pytest.mark.parametrize(
    "code, op_type",
    [("tf_variable_write", "AssignAddVariableOp"), ("rng_state_in_graph", "RandomStandardNormal")],
)
def test_a_graph_only_entry_that_writes_or_draws_refuses_before_it_runs(tf, code, op_type):
    counter = tf.Variable(0.0)
    draws = code == "rng_state_in_graph"

    @tf.function
    def entry(x):
        if draws:
            x = x + tf.random.normal(tf.shape(x))
        counter.assign_add(1.0)
        return x * 2.0

    with pytest.raises(BackendUnsupportedError) as caught:
        tl.trace(entry, tf.ones((2,)), backend="tf")
    assert caught.value.code == code and op_type in caught.value.message and caught.value.remedy
    assert counter.numpy() == 0.0  # the graph was traced, never run
    assert open_session_count() == 0
