"""backend=None routing to tinygrad, replay validation with perturbation on live traces
(tampering fails and names the op), and the spec's examples under DEV=PYTHON and with the CPU
device's C compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("tinygrad")

import tinygrad.nn as nn  # noqa: E402
from tinygrad import Tensor  # noqa: E402

import torchlens as tl  # noqa: E402
from conformance.models.tinygrad import TinyMlp, fn  # noqa: E402

pytestmark = pytest.mark.tinygrad

HERE = os.path.dirname(os.path.abspath(__file__))


def test_backend_none_routes_a_function_of_tinygrad_tensors_and_a_module_object():
    assert tl.backends.resolve(fn, Tensor([1.0]), None).name == "tinygrad"
    assert tl.backends.resolve(TinyMlp(), Tensor.ones(1, 3), None).name == "tinygrad"
    assert tl.backends.resolve(nn.Linear(3, 2), Tensor.ones(1, 3), None).name == "tinygrad"
    trace = tl.trace(fn, Tensor([1.0, -2.0, 3.0]))
    assert trace.backend == "tinygrad"
    assert trace.validate_forward_pass([fn(Tensor([1.0, -2.0, 3.0]))]) is True
    module_trace = tl.trace(TinyMlp(), Tensor.ones(1, 3))
    assert module_trace.backend == "tinygrad" and module_trace.options.module_identity_mode == "object_module"


def test_validation_replays_every_op_with_perturbation():
    trace = tl.trace(TinyMlp(), Tensor.ones(1, 3), backend="tinygrad")
    status = trace.validation_replay_status
    computed = [op for op in trace.ops if op.kind == "compute"]
    assert status.state == "passed" and status.replayed == len(computed)
    assert {reason for label, outcome, reason in status.decisions if outcome == "passed"} == {
        "replay_matched"
    }


def test_tampering_with_one_saved_value_fails_and_names_that_op():
    trace = tl.trace(fn, Tensor([1.0, -2.0, 3.0]), backend="tinygrad")
    target = trace.select(tl.func("mul"))[0]
    # write into the saved buffer itself, after the capture
    target.out.assign(target.out + 1.0).realize()
    status = trace.validation_replay_status
    assert status.state == "failed"
    assert status.first_failed_op == target.label
    assert trace.validate_forward_pass() is False


def test_a_wrong_reference_output_fails_validation():
    trace = tl.trace(fn, Tensor([1.0, -2.0, 3.0]), backend="tinygrad")
    assert trace.validate_forward_pass([Tensor(13.0)]) is False


SPEC_EXAMPLES = """
from tinygrad import Tensor
import tinygrad.nn as nn
import torchlens as tl
from torchlens.options import CaptureOptions

def fn(x):
    return ((x + 1).relu() * 2).sum()

trace = tl.trace(fn, Tensor([1.0, -2.0, 3.0]), backend="tinygrad")
assert trace.validate_forward_pass([fn(Tensor([1.0, -2.0, 3.0]))]) is True

class TinyMlp:
    def __init__(self):
        self.fc = nn.Linear(3, 4)

    def __call__(self, x):
        return self.fc(x).relu()

trace = tl.trace(TinyMlp(), Tensor.ones(1, 3), backend="tinygrad")
assert trace.options.module_identity_mode == "object_module"
assert trace.modules["fc"].params
assert trace.validate_forward_pass() is True

grad_options = tl.backends.tinygrad.GradOptions(input_grad_argnums=(0,))
trace = tl.trace(
    fn, Tensor([1.0, -2.0, 3.0]), backend="tinygrad", capture=CaptureOptions(grad_options=grad_options)
)
assert trace.autograd.derived_grads["inputs.0"].tolist() == [2.0, 0.0, 2.0]
from tinygrad import Device
print("device", Device.DEFAULT)
"""


def _run_examples(device):
    env = dict(os.environ, DEV=device, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run(
        [sys.executable, "-c", SPEC_EXAMPLES], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_spec_examples_run_under_dev_python():
    assert "device PYTHON" in _run_examples("PYTHON")


@pytest.mark.skipif(
    shutil.which("clang") is None,
    reason="tinygrad's CPU device needs clang; scripts/setup-python.sh installs it",
)
def test_the_spec_examples_run_on_the_cpu_device_with_clang():
    assert "device CPU" in _run_examples("CPU")
