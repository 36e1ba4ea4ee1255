"""The kit's program import (``adapter_kit/program_import.py``) driven by hand over NumPy: a
compiled slot program with prepared steps, a constant and a nested instruction, an op replayed
through keyword arguments, an output that is a parameter, opaque ops and a region. The traces it
builds are validated by the shared replay driver and re-evaluated by ``rerun``."""

from __future__ import annotations

import numpy
import pytest
from numpy_adapter.adapter import NumpyAdapter

import torchlens as tl
from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, SaveRequest
from torchlens.adapter_kit.program_import import (
    CONSTANT,
    NESTED,
    OP,
    Program,
    ProgramImport,
    Step,
    rerun,
)
from torchlens.adapter_kit.replay import ParamRef, ReplayRuntime, ValueRef
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.numpy_adapter


class _Adapter(NumpyAdapter):
    """The NumPy adapter taking an op's ``output_index``-th output, as a program import records
    it (the kit's default ``run_op``)."""

    run_op = BackendProtocol.run_op


class _Import(ProgramImport):
    array_type = numpy.ndarray

    def describe(self, value):
        return list(value.shape), value.dtype.name

    def as_value(self, value):
        return numpy.asarray(value)

    def nested(self, item, ins):
        # The one nested instruction of the test program: ``item`` scales its input.
        return self.op("scale", ins, [ins[0][0] * item], [("factor", str(item))], lambda x: [x * item])


class _Apply(Step):
    __slots__ = ()

    def __init__(self, name, function, described):
        self.name, self.attributes, self.described = name, [], described
        self.replay = lambda *args: [function(*args)]

    def run(self, values, fast):
        return self.replay(*values)


def _program():
    """``scale(tanh(x @ w) + c, 2)``, with ``c`` a constant met by the walk."""
    program = Program()
    x, w = program.slot(), program.slot()
    program.in_slots = [x, w]
    product, tanh, c, total, scaled = (program.slot() for _ in range(5))
    program.code = [
        (OP, _Apply("matmul", numpy.matmul, [([2, 2], "float64")]), [x, w], [product]),
        (OP, _Apply("tanh", numpy.tanh, None), [product], [tanh]),
        (CONSTANT, numpy.full((2, 2), 0.5), c),
        (OP, _Apply("add", numpy.add, [([2, 2], "float64")]), [tanh, c], [total]),
        (NESTED, 2.0, [total], [scaled]),
    ]
    program.out_slots = [scaled]
    return program


def _import(build):
    spec = tl.backends.get_spec("numpy")
    adapter = _Adapter(spec)
    request = CaptureRequest(
        tl.backends.get_spec("numpy"), None, (), {}, CaptureOptions(), SaveRequest("all")
    )
    with CaptureSession(request) as session:
        session.module(0, ["self"], "function", False, False)
        importer = _Import(session)
        reference = build(importer)
        runtime = ReplayRuntime(
            importer.records, lambda: reference, importer.params, importer.param_dtypes, importer.values
        )
        return session.finish(adapter, runtime=runtime), importer


def test_a_compiled_program_imports_op_by_op_and_validates():
    x, w = numpy.arange(4.0).reshape(2, 2), numpy.eye(2) * 0.1
    expected = (numpy.tanh(x @ w) + 0.5) * 2.0

    def build(importer):
        pairs = [importer.input("inputs.0", x), importer.param("w", 0, w)]
        [out] = importer.run_program(_program(), [], pairs)
        numpy.testing.assert_allclose(out[0], expected)
        importer.output("output.0", out)
        importer.output("output.1", pairs[1], lambda value: [value.copy()])
        return [expected, w]

    trace, importer = _import(build)
    assert [op.func_name for op in trace.ops if op.kind == "compute"] == [
        "matmul",
        "tanh",
        "add",
        "scale",
        "copy",
    ]
    matmul = importer.records[min(importer.records)]
    assert type(matmul.args[0]) is ValueRef and type(matmul.args[1]) is ParamRef
    assert trace.validate_forward_pass([]) is True
    numpy.testing.assert_allclose(rerun(trace, {})[0], expected)
    # A tap adds to one value and everything downstream of it moves.
    tanh_id = next(key for key, record in importer.records.items() if record.func_name == "tanh")
    tapped = rerun(trace, {tanh_id: numpy.ones((2, 2))})[0]
    numpy.testing.assert_allclose(tapped, expected + 2.0)
    replaced = rerun(trace, {}, (tanh_id, numpy.zeros((2, 2))))[0]
    numpy.testing.assert_allclose(replaced, numpy.full((2, 2), 1.0))


def _multiply(x1, x2, dtype):
    return numpy.multiply(x1, x2, dtype=dtype)


def test_keyword_templates_opaque_ops_and_regions():
    x = numpy.array([1.0, -2.0])

    def build(importer):
        given = importer.input("inputs.0", x)
        doubled = importer.constant(numpy.array([2.0, 2.0]))
        # A keyword call: inputs found by identity become references, other arguments stay.
        keywords = {"x1": given[0], "x2": doubled[0], "dtype": "float64"}
        [product] = importer.op(
            "multiply", [given, doubled], [x * 2.0], call=_multiply, keywords=keywords, indexed=False
        )
        [hidden] = importer.op("stateful", [product], [None], described=[([2], "float64")], keep=False)
        region = importer.region(
            "loop", [product], lambda value: [value + 1.0, value - 1.0], [], lambda index: ([2], "float64")
        )
        importer.output("output.0", region[0])
        importer.output("output.1", region[1])
        importer.output("output.2", hidden)
        return [x * 2.0 + 1.0, x * 2.0 - 1.0]

    trace, importer = _import(build)
    records = list(importer.records.values())
    multiply = next(record for record in records if record.func_name == "multiply")
    assert multiply.args == () and multiply.output_index is None
    assert isinstance(multiply.kwargs["x1"], ValueRef) and isinstance(multiply.kwargs["x2"], ValueRef)
    assert multiply.kwargs["dtype"] == "float64"
    stateful = next(record for record in records if record.func_name == "stateful")
    assert stateful.opaque and stateful.region_reason == "opaque_region"
    boundary = next(record for record in records if record.func_name == "loop")
    projections = [record for record in records if record.func_name == "region_output"]
    assert boundary.opaque and [p.seam for p in projections] == [True, True]
    assert [p.output_index for p in projections] == [0, 1]
    # The boundary and the opaque op cannot be checked per op: unverified, never failed.
    status = trace.validate_forward_pass([])
    assert status.state == "unverified" and status.failed == 0
