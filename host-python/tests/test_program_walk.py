"""The kit's capture by program walk (``adapter_kit/program_walk.py``) over a small program format
of its own (NumPy values): a pure call inlined, a counted loop unrolled into per-trip slices and
one stack, a branch chosen by its index, a while loop unrolled within the cap and a region over
it, and ``region`` mode. The traces are validated by the shared replay driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List

import numpy
import pytest
from numpy_adapter.adapter import NumpyAdapter

import torchlens as tl
from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, SaveRequest
from torchlens.adapter_kit.program_import import Step
from torchlens.adapter_kit.program_walk import Branch, CountedLoop, ProgramWalk, WhileLoop
from torchlens.adapter_kit.replay import ReplayRuntime
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.numpy_adapter


class _Adapter(NumpyAdapter):
    """The NumPy adapter taking an op's ``output_index``-th output, as a program walk records it."""

    run_op = BackendProtocol.run_op


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(eq=False)
class Eqn:
    name: str
    ins: List[Any]
    outs: List[str]
    params: dict = field(default_factory=dict)


@dataclass(eq=False)
class Body:
    invars: List[str]
    outvars: List[Any]
    eqns: List[Eqn]
    constvars: List[str] = field(default_factory=list)
    consts: List[Any] = field(default_factory=list)


_FUNCTIONS = {"add": numpy.add, "mul": numpy.multiply, "tanh": numpy.tanh, "less": numpy.less}


class _Apply(Step):
    __slots__ = ()

    def __init__(self, eqn):
        function = _FUNCTIONS[eqn.name]
        self.name, self.attributes, self.described = eqn.name, [], None
        self.replay = lambda *args: [function(*args)]

    def run(self, values, fast):
        return self.replay(*values)


class _Walk(ProgramWalk):
    array_type = numpy.ndarray

    def describe(self, value):
        value = numpy.asarray(value)
        return list(value.shape), value.dtype.name

    def as_value(self, value):
        return numpy.asarray(value)

    def unclose(self, body):
        return body, body.consts

    def parts(self, body):
        return body.constvars, body.invars, body.outvars, body.eqns

    def equation_vars(self, eqn):
        return eqn.ins, eqn.outs

    def literal(self, atom):
        return (atom.value,) if isinstance(atom, Lit) else None

    def prepare(self, eqn):
        return _Apply(eqn)

    def walked(self, eqn):
        return eqn.name in ("loop", "branch", "while")

    def inlined(self, eqn, ins):
        return (eqn.params["body"], ins) if eqn.name == "call" else (None, [])

    def control(self, eqn, ins):
        params = eqn.params
        if eqn.name == "loop":
            return CountedLoop(params["length"], params["reverse"], params["body"], [], ins[:1], ins[1:])
        if eqn.name == "branch":
            return Branch(ins[0][0], params["branches"], ins[1:])
        return WhileLoop(params["test"], params["body"], [], [], ins)

    def region_parts(self, eqn):
        # ``whole``: the equation as one function of values (what the region re-runs).
        return eqn.name, eqn.params["whole"], [], lambda index: ([], "float64")

    def as_function(self, body):
        def run(*values):
            env = dict(zip(body.constvars, body.consts))
            env.update(zip(body.invars, values))
            for eqn in body.eqns:
                args = [atom.value if isinstance(atom, Lit) else env[atom] for atom in eqn.ins]
                if eqn.name == "call":
                    outs = self.as_function(eqn.params["body"])(*args)
                else:
                    outs = [_FUNCTIONS[eqn.name](*args)]
                env.update(zip(eqn.outs, outs))
            return [atom.value if isinstance(atom, Lit) else env[atom] for atom in body.outvars]

        return run

    def slicer(self, index):
        return lambda value: [numpy.asarray(value[index])]

    def stacker(self, *values):
        return [numpy.stack(values)]


def _capture(body, args, expected, mode="unroll", cap=8):
    spec = tl.backends.get_spec("numpy")
    request = CaptureRequest(spec, None, (), {}, CaptureOptions(), SaveRequest("all"))
    with CaptureSession(request) as session:
        session.module(0, ["self"], "function", False, False)
        walk = _Walk(session, mode, cap)
        pairs = [walk.input(f"inputs.{index}", value) for index, value in enumerate(args)]
        outs = walk.run_closed(body, pairs)
        for index, pair in enumerate(outs):
            walk.output(f"output.{index}", pair)
        runtime = ReplayRuntime(walk.records, lambda: expected, walk.params, walk.param_dtypes, walk.values)
        trace = session.finish(_Adapter(spec), runtime=runtime)
    for (value, _), wanted in zip(outs, expected):
        numpy.testing.assert_allclose(value, wanted)
    return trace


def _compute(trace):
    return [op.func_name for op in trace.ops if op.kind == "compute"]


# ``carry, y = carry + tanh(x) * 2`` each trip, with the doubling an inlined call.
_DOUBLE = Body(["v"], ["w"], [Eqn("mul", ["v", Lit(2.0)], ["w"])])
_STEP = Body(
    ["carry", "x"],
    ["next", "y"],
    [
        Eqn("tanh", ["x"], ["t"]),
        Eqn("call", ["t"], ["y"], {"body": _DOUBLE}),
        Eqn("add", ["carry", "y"], ["next"]),
    ],
)


def _scan(length, reverse=False):
    loop = Eqn("loop", ["c", "xs"], ["final", "ys"], {"length": length, "reverse": reverse, "body": _STEP})
    return Body(["c", "xs"], ["final", "ys"], [loop])


def _scan_whole(length, reverse):
    def run(carry, xs):
        ys = [None] * length
        for trip in range(length - 1, -1, -1) if reverse else range(length):
            ys[trip] = numpy.tanh(xs[trip]) * 2.0
            carry = carry + ys[trip]
        return [carry, numpy.stack(ys)]

    return run


@pytest.mark.parametrize("reverse", [False, True])
def test_a_counted_loop_unrolls_into_slices_the_body_and_one_stack(reverse):
    carry, xs = numpy.zeros(2), numpy.arange(6.0).reshape(3, 2) / 4
    trace = _capture(_scan(3, reverse), [carry, xs], _scan_whole(3, reverse)(carry, xs))
    assert _compute(trace) == ["slice", "tanh", "mul", "add"] * 3 + ["stack"]
    slices = trace.select(tl.func("slice"))
    assert [op.attributes["index"] for op in slices] == (["2", "1", "0"] if reverse else ["0", "1", "2"])
    assert trace.validate_forward_pass([]) is True


@pytest.mark.parametrize(("mode", "cap", "length"), [("unroll", 2, 3), ("unroll", 8, 0), ("region", 8, 3)])
def test_an_over_cap_or_empty_counted_loop_and_region_mode_record_one_region(mode, cap, length):
    carry, xs = numpy.zeros(2), numpy.arange(2.0 * length).reshape(length, 2) / 4
    body = _scan(length)
    body.eqns[0].params["whole"] = _scan_whole(length, False) if length else lambda c, x: [c, x]
    trace = _capture(body, [carry, xs], body.eqns[0].params["whole"](carry, xs), mode, cap)
    assert _compute(trace) == ["loop", "region_output", "region_output"]
    [boundary] = trace.select(tl.func("loop"))
    assert boundary.attributes["region"] == "true"
    assert "slice" not in _compute(trace)


def test_a_branch_runs_the_branch_its_index_chooses_clamped():
    negate = Body(["v"], ["w"], [Eqn("mul", ["v", Lit(-1.0)], ["w"])])
    squash = Body(["v"], ["w"], [Eqn("tanh", ["v"], ["w"])])
    body = Body(["i", "v"], ["out"], [Eqn("branch", ["i", "v"], ["out"], {"branches": [negate, squash]})])
    x = numpy.array([0.5, -1.0])
    for index, name, wanted in ((0, "mul", -x), (1, "tanh", numpy.tanh(x)), (7, "tanh", numpy.tanh(x))):
        trace = _capture(body, [numpy.array(index), x], [wanted])
        assert _compute(trace) == [name]


def test_a_while_loop_unrolls_its_tests_and_trips_within_the_cap_else_is_a_region():
    # ``while v < 10: v = v * 2`` from 1: four trips (2, 4, 8, 16), the fifth test fails.
    test = Body(["v"], ["go"], [Eqn("less", ["v", Lit(10.0)], ["go"])])
    double = Body(["v"], ["w"], [Eqn("mul", ["v", Lit(2.0)], ["w"])])
    loop = Eqn("while", ["v"], ["out"], {"test": test, "body": double, "whole": lambda v: [v * 16.0]})
    body = Body(["v"], ["out"], [loop])
    start = numpy.array(1.0)
    trace = _capture(body, [start], [16.0], cap=4)
    assert _compute(trace) == ["less", "mul"] * 4 + ["less"]
    trace = _capture(body, [start], [16.0], cap=3)
    assert _compute(trace) == ["while", "region_output"]
