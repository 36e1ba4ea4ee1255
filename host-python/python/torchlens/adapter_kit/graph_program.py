"""A framework's dataflow graph (a traced function: ops listed in an order where every op comes
after the ops it reads from) compiled once onto the kit's slot
:class:`~.program_import.Program`, for :meth:`~.program_import.ProgramImport.run_program`:

* only the ops the graph's results depend on through data edges are kept;
* a call whose callee the backend can read is inlined: the callee's parameters are bound to the
  call's arguments and its results become the call's outputs, at any depth;
* every other op is one ``NESTED`` instruction holding the op itself, which the backend's
  :meth:`~.program_import.ProgramImport.nested` runs on concrete values (a decision that needs
  values, such as the branch a conditional takes, is made there).

An op input that no kept op, parameter or inlined call produced reads a literal slot holding
``(None, None)``: the backend sees an input with neither a value nor a value id (a producer
the import never saw)."""

from __future__ import annotations

from typing import Any, Dict, Hashable, List, Optional, Sequence, Set, Tuple

from .program_import import NESTED, Program


class GraphReader:
    """How a backend reads its graph format. An edge is what one op produces and others read
    (a graph tensor). The defaults read the attribute names graph formats commonly use: an op's
    ``inputs`` and ``outputs``, an edge's ``op``, a graph's ``inputs`` and ``outputs``."""

    def ops(self, graph: Any) -> Sequence[Any]:
        """The graph's ops, each after the ops it reads from."""
        raise NotImplementedError

    def inputs(self, op: Any) -> Sequence[Any]:
        """The edges an op reads, in argument order."""
        return list(op.inputs)

    def outputs(self, op: Any) -> Sequence[Any]:
        """The edges an op produces, in output order."""
        return list(op.outputs)

    def producer(self, edge: Any) -> Any:
        """The op that produces an edge (None where no op does: a parameter, in some formats)."""
        return edge.op

    def key(self, edge: Any) -> Hashable:
        """An edge's identity (wrappers of one edge may be different objects)."""
        raise NotImplementedError

    def op_key(self, op: Any) -> Hashable:
        """An op's identity."""
        return id(op)

    def parameters(self, graph: Any) -> Sequence[Any]:
        """The edges a graph (or a callee) takes as its arguments."""
        return list(graph.inputs)

    def results(self, graph: Any) -> Sequence[Any]:
        """The edges a graph (or a callee) returns."""
        return list(graph.outputs)

    def skipped(self, op: Any) -> bool:
        """Whether an op only passes control or structure (not recorded)."""
        return False

    def callee(self, op: Any) -> Optional[Tuple[Any, int]]:
        """``(callee graph, index of its first argument among the op's inputs)`` of a call
        inlined in place of the op, or None (the op stays one instruction)."""
        return None


def needed_ops(reader: GraphReader, results: Sequence[Any]) -> Set[Hashable]:
    """Keys of the ops ``results`` depend on through data edges."""
    needed: Set[Hashable] = set()
    stack = [reader.producer(edge) for edge in results]
    while stack:
        op = stack.pop()
        if op is None:
            continue
        key = reader.op_key(op)
        if key in needed:
            continue
        needed.add(key)
        stack.extend(reader.producer(edge) for edge in reader.inputs(op))
    return needed


def compile_graph(reader: GraphReader, graph: Any, results: Optional[Sequence[Any]] = None) -> Program:
    """``graph`` compiled: its parameters are the program's input slots, ``results`` (by
    default the graph's own) its output slots."""
    program = Program()
    env: Dict[Hashable, int] = {}
    for edge in reader.parameters(graph):
        env[reader.key(edge)] = slot = program.slot()
        program.in_slots.append(slot)
    program.out_slots = _compile_body(program, reader, graph, env, results)
    return program


def _compile_body(
    program: Program,
    reader: GraphReader,
    graph: Any,
    env: Dict[Hashable, int],
    results: Optional[Sequence[Any]] = None,
) -> List[int]:
    """Compiles the ops of ``graph`` its results need into ``program``, with its edges bound
    by ``env``; returns the slots of its results."""
    results = list(reader.results(graph) if results is None else results)
    needed = needed_ops(reader, results)
    for op in reader.ops(graph):
        if reader.op_key(op) not in needed or reader.skipped(op):
            continue
        in_slots = [_slot(program, reader, env, edge) for edge in reader.inputs(op)]
        inlined = reader.callee(op)
        if inlined is not None:
            body, first = inlined
            inner = {reader.key(edge): slot for edge, slot in zip(reader.parameters(body), in_slots[first:])}
            out_slots = _compile_body(program, reader, body, inner)
        else:
            out_slots = [program.slot() for _ in reader.outputs(op)]
            program.code.append((NESTED, op, in_slots, out_slots))
        for edge, slot in zip(reader.outputs(op), out_slots):
            env[reader.key(edge)] = slot
    return [_slot(program, reader, env, edge) for edge in results]


def _slot(program: Program, reader: GraphReader, env: Dict[Hashable, int], edge: Any) -> int:
    """The slot of an edge; an edge nothing produced reads a literal ``None`` (no value, no id)."""
    key = reader.key(edge)
    slot = env.get(key)
    if slot is None:
        slot = env[key] = program.literal(None)
    return slot
