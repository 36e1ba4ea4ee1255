"""The kit's graph compiler and graph import (``adapter_kit/graph_program.py``,
``graph_import.py``) driven over a toy graph format on NumPy: dead ops are pruned, a call is
inlined, an op reading an edge nothing produced sees no value and no id and makes its outputs
unresolved, an output the op-by-op run cannot compute comes from one real run of the entry, a
branch chosen at run time is compiled once, and the trace validates."""

from __future__ import annotations

import numpy
import pytest
from numpy_adapter.adapter import NumpyAdapter

import torchlens as tl
from torchlens.adapter_kit import BackendProtocol, CaptureRequest, CaptureSession, SaveRequest
from torchlens.adapter_kit.graph_import import GraphImport
from torchlens.adapter_kit.graph_program import GraphReader, compile_graph, needed_ops
from torchlens.adapter_kit.program_cache import ProgramCache
from torchlens.adapter_kit.program_import import NESTED
from torchlens.adapter_kit.replay import ReplayRuntime
from torchlens.options import CaptureOptions

pytestmark = pytest.mark.numpy_adapter


class Edge:
    def __init__(self, op, name):
        self.op, self.name = op, name


class Op:
    """One op of the toy format: ``kind`` is a NumPy function name, ``call`` (its ``body`` a
    Graph) or ``hidden`` (an op the import cannot run)."""

    def __init__(self, graph, kind, inputs, outputs=1, body=None):
        self.kind, self.inputs, self.body = kind, list(inputs), body
        self.outputs = [Edge(self, f"{kind}{len(graph.ops)}:{index}") for index in range(outputs)]
        graph.ops.append(self)


class Graph:
    def __init__(self, parameters):
        self.ops = []
        self.inputs = [Edge(None, name) for name in parameters]
        self.outputs = []


class Reader(GraphReader):
    def ops(self, graph):
        return graph.ops

    def key(self, edge):
        return id(edge)

    def callee(self, op):
        return (op.body, 0) if op.kind == "call" else None


class Import(GraphImport):
    array_type = numpy.ndarray

    def describe(self, value):
        return list(value.shape), value.dtype.name

    def nested(self, op, ins):
        values = [value for value, _ in ins]
        if op.kind == "pick":
            # The branch is chosen by the first input's value; the second is its argument.
            taken = BRANCHES["double" if values[0] > 0 else "negate"]
            pairs = self.run_branch(("pick", bool(values[0] > 0)), lambda: taken, ins[1:])
            if pairs is not None:
                return pairs
        call = None
        if op.kind != "hidden" and all(value is not None for value in values):
            # Replay calls ``call(**keywords)``, the inputs found there by identity.
            call = (_applied(op.kind), {f"a{index}": value for index, value in enumerate(values)})
        value = call[0](**call[1]) if call is not None else self.entry_output(op.outputs[0])
        unresolved = any(value_id is None for _, value_id in ins)
        described = [([2], "float64")]
        keep = value is not None
        return self.graph_op(op.kind, ins, [value], described, [], call, unresolved, keep, "opaque_region")


def _applied(kind):
    def apply(**named):
        return getattr(numpy, kind)(*named.values())

    return apply


def _double():
    body = Graph(["y"])
    body.outputs = [Op(body, "add", [body.inputs[0], body.inputs[0]]).outputs[0]]
    return body


def _negate():
    body = Graph(["y"])
    body.outputs = [Op(body, "negative", [body.inputs[0]]).outputs[0]]
    return body


BRANCHES = {"double": _double(), "negate": _negate()}


def _entry():
    """``exp(call(tanh)(x)) + hidden(x)``, with a dead ``sin`` and a ``pick`` on ``flag``."""
    graph = Graph(["x", "flag"])
    x, flag = graph.inputs
    body = Graph(["z"])
    body.outputs = [Op(body, "tanh", [body.inputs[0]]).outputs[0]]
    called = Op(graph, "call", [x], body=body).outputs[0]
    Op(graph, "sin", [x])  # dead: no output depends on it
    exp = Op(graph, "exp", [called]).outputs[0]
    hidden = Op(graph, "hidden", [x]).outputs[0]
    total = Op(graph, "add", [exp, hidden]).outputs[0]
    picked = Op(graph, "pick", [flag, total]).outputs[0]
    orphan = Edge(None, "orphan")  # read, but produced by no op of the graph
    mixed = Op(graph, "multiply", [picked, orphan]).outputs[0]
    graph.outputs = [picked, hidden, mixed]
    return graph


def _capture(graph, x, flag, entry):
    spec = tl.backends.get_spec("numpy")
    adapter = type("Adapter", (NumpyAdapter,), {"run_op": BackendProtocol.run_op})(spec)
    request = CaptureRequest(spec, None, (), {}, CaptureOptions(), SaveRequest("all"))
    runs = []
    hidden = x * 3.0

    def run_entry():
        runs.append(1)
        return [None, hidden, None]

    with CaptureSession(request) as session:
        session.module(0, ["self"], "function", False, False)
        importer = Import(session, Reader(), entry, graph.outputs, run_entry)
        pairs = [importer.input("inputs.0", x), importer.input("inputs.1", flag)]
        outs = importer.run_program(entry.traced, [], pairs)
        for index, pair in enumerate(outs[:2]):
            importer.output(f"output.{index}", pair)
        expected = (numpy.exp(numpy.tanh(x)) + hidden) * (2.0 if flag > 0 else -1.0)
        runtime = ReplayRuntime(
            importer.records,
            lambda: [expected, hidden],
            importer.params,
            importer.param_dtypes,
            importer.values,
            unresolved=importer.unresolved,
        )
        trace = session.finish(adapter, runtime=runtime)
    return trace, importer, outs, runs, expected


def test_a_graph_compiles_pruned_with_its_call_inlined():
    reader = Reader()
    graph = _entry()
    program = compile_graph(reader, graph)
    kinds = [instruction[1].kind for instruction in program.code]
    assert all(instruction[0] == NESTED for instruction in program.code)
    # The call is inlined (its tanh in its place), the dead sin pruned.
    assert kinds == ["tanh", "exp", "hidden", "add", "pick", "multiply"]
    assert "sin" not in {
        op.kind for op in graph.ops if reader.op_key(op) in needed_ops(reader, graph.outputs)
    }
    # The edge nothing produced reads a literal slot holding no value and no id.
    assert [pair for _, pair in program.literals] == [(None, None)]
    assert len(program.in_slots) == 2 and len(program.out_slots) == 3


@pytest.mark.parametrize("flag", [1.0, -1.0])
def test_a_compiled_graph_imports_op_by_op_and_validates(flag):
    x = numpy.array([0.5, -1.0])
    graph = _entry()
    cache = ProgramCache(4)
    entry = cache.lookup(id(graph), (graph,), lambda: compile_graph(Reader(), graph))
    trace, importer, outs, runs, expected = _capture(graph, x, numpy.array(flag), entry)
    numpy.testing.assert_allclose(outs[0][0], expected)
    # The hidden op's value came from one run of the whole entry.
    numpy.testing.assert_allclose(outs[1][0], x * 3.0)
    assert runs == [1] and importer.opaque == 2
    # The op reading the orphan edge (no value: not run) made its output unresolved.
    assert outs[2][1] in importer.unresolved and outs[2][0] is None
    branch = "add" if flag > 0 else "negative"
    assert [op.func_name for op in trace.ops if op.kind == "compute"][-3:-1] == ["add", branch]
    assert importer.replayable() == 4
    # The branch was compiled once, under its key, in the entry.
    assert list(entry.programs) == [("pick", flag > 0)]
    status = trace.validate_forward_pass([])
    assert status.state == "unverified" and status.failed == 0
    # The entry is found again while the graph lives.
    assert cache.lookup(id(graph), (graph,), lambda: pytest.fail("traced twice")) is entry
