"""Every public function checks its arguments at the door: a wrong kind of argument is a typed
error with a code and a remedy (``ArgumentError`` ``argument_invalid`` or a more precise code),
never a raw error from inside the package; a path that cannot be read or written is a
``FileAccessError`` that is also the matching ``OSError`` and names the user's path."""

from __future__ import annotations

import inspect
import os
import sys
import traceback
import warnings

import pytest
import torch
from torch import nn

import torchlens as tl
from conformance.models.torch import Mlp
from torchlens.errors import ArgumentError, FileAccessError, TorchLensError

pytestmark = pytest.mark.torch

HERE = os.path.abspath(__file__)


class _NotAModel:
    pass


#: One value of each kind a user passes by mistake.
WRONG_KINDS = {
    "object": object(),
    "class": _NotAModel,
    "complex": 1j,
    "bytes": b"x",
    "dict": {"a": 1},
    "list": [1, 2],
    "str": "junk",
    "negative": -3,
    "nan": float("nan"),
    "none": None,
    "true": True,
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("walk")
    model = Mlp(3, 4, 2)
    x = torch.randn(2, 3)
    trace = tl.trace(model, x)
    trace.save(str(folder / "ok.tlspec"))
    return folder, model, x, trace


def _public_calls(folder, model, x, trace):
    """Each public callable with arguments it accepts: the walk replaces one at a time."""
    relu = tl.func("relu")
    return {
        "trace": (tl.trace, (model, x), {}),
        "record": (tl.record, (model, x), {"save": relu}),
        "validate": (tl.validate, (trace,), {}),
        "load": (tl.load, (str(folder / "ok.tlspec"),), {}),
        "load_extraction": (tl.load_extraction, (str(folder),), {}),
        "extract_dataset": (
            tl.extract_dataset,
            (model, [x], relu, str(folder / "extracted")),
            {"progress": False},
        ),
        "when": (tl.when, (relu, tl.zero_ablate()), {}),
        "grad": (tl.grad, (relu,), {}),
        "zero_ablate": (tl.zero_ablate, (), {}),
        "scale": (tl.scale, (2.0,), {}),
        "add": (tl.add, (1.0,), {}),
        "clamp": (tl.clamp, (), {"min": 0.0}),
        "replace_with": (tl.replace_with, (0.0,), {}),
        "mean_ablate": (tl.mean_ablate, (), {}),
        "patch_from": (tl.patch_from, (trace,), {}),
        "func": (tl.func, ("relu",), {}),
        "label": (tl.label, ("relu_1_2",), {}),
        "label_contains": (tl.label_contains, ("relu",), {}),
        "module": (tl.module, ("fc1",), {}),
        "in_module": (tl.in_module, ("fc1",), {}),
        "followed_by": (tl.followed_by, (tl.func("linear"), relu), {}),
        "preceded_by": (tl.preceded_by, (relu, tl.func("linear")), {}),
        "downstream_of": (tl.downstream_of, (tl.func("linear"),), {}),
        "upstream_of": (tl.upstream_of, (relu,), {}),
        "where": (tl.where, (lambda op: True,), {}),
        "parse_selector": (tl.parse_selector, ("func:relu",), {}),
        "Trace.save": (trace.save, (str(folder / "again.tlspec"),), {}),
        "Trace.draw": (trace.draw, (str(folder / "graph.svg"),), {}),
        "Trace.select": (trace.select, ("func:relu",), {}),
        "Trace.validate_forward_pass": (trace.validate_forward_pass, (), {}),
        "Trace.ancestors": (trace.ancestors, ("relu_1_2",), {}),
        "Trace.descendants": (trace.descendants, ("relu_1_2",), {}),
        "Trace.__getitem__": (trace.__getitem__, ("relu_1_2",), {}),
    }


#: Arguments handed to the model untouched (any value is some model's input): the model's own
#: error on them, its signature's included, is the user's to see. Keyword inputs are checked
#: for being a mapping; what the mapping holds goes to the model.
MODEL_INPUTS = (
    {("x", kind) for kind in WRONG_KINDS} | {("data", kind) for kind in WRONG_KINDS} | {("kwargs", "dict")}
)


def _raw_error(call, args, kwargs):
    """None when the call returned, raised a typed error, or raised inside the user's own
    forward (the model's error on the model's input is the user's to see); else a description
    of the raw error and where it came from."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(*args, **kwargs)
    except TorchLensError:
        return None
    except Exception as error:  # noqa: BLE001 - any other exception is the finding
        frames = traceback.extract_tb(error.__traceback__)
        if any(frame.filename == HERE and frame.name == "forward" for frame in frames):
            return None
        last = frames[-1]
        return (
            f"{type(error).__name__}: {str(error)[:100]} at {os.path.basename(last.filename)}:{last.lineno}"
        )
    return None


def test_every_public_function_answers_wrong_argument_kinds_with_a_typed_error(world, monkeypatch):
    folder, model, x, trace = world
    # A wrong path argument must not write into the test's folder either.
    monkeypatch.chdir(folder)
    tl.extract_dataset(model, [x], tl.func("relu"), str(folder), progress=False)
    findings = []
    for name, (call, args, kwargs) in _public_calls(folder, model, x, trace).items():
        parameters = [
            parameter
            for parameter in inspect.signature(call).parameters.values()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        ]
        assert _raw_error(call, args, kwargs) is None, f"{name} fails on its valid call"
        for position, parameter in enumerate(parameters):
            for kind, wrong in WRONG_KINDS.items():
                if (parameter.name, kind) in MODEL_INPUTS:
                    continue
                given_args, given_kwargs = list(args), dict(kwargs)
                if parameter.kind == parameter.KEYWORD_ONLY or position >= len(given_args):
                    given_kwargs[parameter.name] = wrong
                else:
                    given_args[position] = wrong
                found = _raw_error(call, given_args, given_kwargs)
                if found:
                    findings.append(f"{name}({parameter.name}={kind}): {found}")
    assert findings == []
    # Standard output survived (True is file descriptor 1 to open(); a path check must refuse it).
    assert not sys.stdout.closed and os.fstat(1)


@pytest.mark.parametrize(
    ("mistake", "code"),
    [
        (lambda model, x: tl.trace(nn.Linear, x), "model_is_a_class"),
        (lambda model, x: tl.trace(model, (x,), [1, 2]), "argument_invalid"),
        (lambda model, x: tl.trace(model, x, capture={"a": 1}), "argument_invalid"),
        (lambda model, x: tl.trace(model, x, backend=["torch"]), "argument_invalid"),
        (lambda model, x: tl.trace(model, x, intervene="func:relu"), "argument_invalid"),
        (lambda model, x: tl.trace(model, x, save=_NotAModel), "argument_invalid"),
        (lambda model, x: tl.when(tl.func("relu"), "zero"), "argument_invalid"),
        (lambda model, x: tl.scale("2"), "argument_invalid"),
        (lambda model, x: tl.clamp(min=1.0, max=0.0), "argument_invalid"),
        (lambda model, x: tl.record(model, x, save=tl.func("relu"), return_output="yes"), "argument_invalid"),
    ],
)
def test_each_reported_mistake_gets_its_code(world, mistake, code):
    _folder, model, x, _trace = world
    with pytest.raises(TorchLensError) as caught:
        mistake(model, x)
    assert caught.value.code == code
    assert caught.value.remedy


def test_the_wrong_kind_is_also_a_type_error():
    with pytest.raises(TypeError):
        tl.func(3)
    assert issubclass(ArgumentError, TypeError) and issubclass(ArgumentError, ValueError)


def test_saving_into_a_missing_folder_names_the_users_path(world, tmp_path):
    _folder, _model, _x, trace = world
    target = tmp_path / "no" / "such" / "run.tlspec"
    with pytest.raises(FileNotFoundError) as caught:
        trace.save(str(target))
    error = caught.value
    assert isinstance(error, FileAccessError) and error.code == "io_not_found"
    assert error.filename == str(target) and ".partial" not in str(error)
    assert str(target.parent) in str(error)


def test_saving_onto_a_folder_is_not_a_file(world, tmp_path):
    _folder, _model, _x, trace = world
    with pytest.raises(IsADirectoryError) as caught:
        trace.save(str(tmp_path))
    assert caught.value.code == "io_not_a_file" and ".partial" not in str(caught.value)
    assert os.listdir(tmp_path) == []


def test_an_unwritable_folder_is_a_permission_error(world, tmp_path):
    _folder, _model, _x, trace = world
    if os.geteuid() == 0:
        # Root writes into any folder of its own; Linux's sysfs refuses new files even to root.
        locked = "/sys"
    else:
        locked = str(tmp_path / "locked")
        os.mkdir(locked, mode=0o500)
    target = os.path.join(locked, "run.tlspec")
    with pytest.raises(PermissionError) as caught:
        trace.save(target)
    assert caught.value.code == "io_permission_denied" and caught.value.filename == target


def test_loading_a_missing_file_or_a_folder_is_typed(tmp_path):
    with pytest.raises(FileNotFoundError) as missing:
        tl.load(str(tmp_path / "absent.tlspec"))
    assert missing.value.code == "io_not_found" and missing.value.filename == str(tmp_path / "absent.tlspec")
    with pytest.raises(IsADirectoryError) as folder:
        tl.load(str(tmp_path))
    assert folder.value.code == "io_not_a_file"


def test_load_extraction_of_a_tlspec_file_names_the_folder_it_wants(world):
    folder, _model, _x, _trace = world
    with pytest.raises(NotADirectoryError) as caught:
        tl.load_extraction(str(folder / "ok.tlspec"))
    assert caught.value.code == "io_not_a_folder"
    assert "tl.load" in caught.value.remedy and "index.json" not in str(caught.value)


def test_draw_writes_the_format_its_suffix_names_or_refuses(world, tmp_path):
    _folder, _model, _x, trace = world
    trace.draw(str(tmp_path / "graph.svg"))
    assert (tmp_path / "graph.svg").read_text().startswith("<svg")
    trace.draw(str(tmp_path / "graph.html"))
    page = (tmp_path / "graph.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    for refused in ("graph.png", "graph.pdf", "graph"):
        with pytest.raises(tl.TorchLensError) as caught:
            trace.draw(str(tmp_path / refused))
        assert caught.value.code == "draw_format_unsupported"
        assert not (tmp_path / refused).exists()


def test_an_op_index_out_of_range_is_typed_and_still_an_index_error(world):
    _folder, _model, _x, trace = world
    assert trace[-1].label == trace.ops[-1].label
    with pytest.raises(IndexError) as caught:
        trace[len(trace.ops)]
    assert caught.value.code == "op_index_out_of_range"
    assert 5 not in trace
