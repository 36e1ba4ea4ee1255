"""A framework's dataflow program (a traced function or a graph: ops listed in an order where
every op comes after the ops it reads from) compiled once onto the kit's slot
:class:`~.program_import.Program`, for :meth:`~.program_import.ProgramImport.run_program`. One
compiler for every program a backend hands over, read through a :class:`GraphReader`:

* a graph is pruned to the ops its results depend on through data edges (a reader whose edges
  do not know their producer, such as a program of equations, keeps every op);
* a call whose callee the backend can read is inlined: the callee's constants become constant
  instructions, its parameters are bound to the call's arguments and its results become the
  call's outputs, at any depth;
* an op the reader prepares as a :class:`~.program_import.Step` is one ``OP`` instruction; every
  other op is one ``NESTED`` instruction holding the op itself, which the backend's
  :meth:`~.program_import.ProgramImport.nested` runs on concrete values (a decision that needs
  values, such as the branch a conditional takes, is made there);
* a literal operand reads a literal slot; an op input that no kept op, parameter or inlined call
  produced reads a literal slot holding ``(None, None)``: the backend sees an input with neither
  a value nor a value id (a producer the import never saw)."""

from __future__ import annotations

from typing import Any, Dict, Hashable, List, Optional, Sequence, Set, Tuple

from .program_import import CONSTANT, NESTED, OP, Program, Step


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

    #: Whether a graph is pruned to the ops its results need (needs :meth:`producer`).
    prunes = True

    def constants(self, graph: Any) -> Sequence[Any]:
        """The edges a graph (or a callee) closes over, bound to the program's constant slots
        (or, for a callee, to the constant values :meth:`inline` gives)."""
        return []

    def literal(self, edge: Any) -> Optional[Tuple[Any]]:
        """``(value,)`` for an operand that is a literal, None for an edge."""
        return None

    def dropped(self, edge: Any) -> bool:
        """Whether an op's output is never read (it gets no slot)."""
        return False

    def step(self, op: Any) -> Optional[Step]:
        """The op prepared as a plain step (one ``OP`` instruction), or None (``NESTED``)."""
        return None

    def inline(self, op: Any, in_slots: List[int]) -> Optional[Tuple[Any, List[int], Sequence[Any]]]:
        """``(callee graph, the slots of its arguments, the values of its constants)`` of a call
        inlined in place of the op, or None; by default from :meth:`callee`."""
        found = self.callee(op)
        return None if found is None else (found[0], in_slots[found[1] :], ())


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
    for edge in reader.constants(graph):
        env[reader.key(edge)] = slot = program.slot()
        program.const_slots.append(slot)
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
    needed = needed_ops(reader, results) if reader.prunes else None
    for op in reader.ops(graph):
        if (needed is not None and reader.op_key(op) not in needed) or reader.skipped(op):
            continue
        in_slots = [_slot(program, reader, env, edge) for edge in reader.inputs(op)]
        inlined = reader.inline(op, in_slots)
        out_slots: List[Optional[int]]
        if inlined is not None:
            body, arguments, consts = inlined
            inner: Dict[Hashable, int] = {}
            for edge, value in zip(reader.constants(body), consts):
                inner[reader.key(edge)] = slot = program.slot()
                program.code.append((CONSTANT, value, slot))
            inner.update((reader.key(edge), slot) for edge, slot in zip(reader.parameters(body), arguments))
            out_slots = list(_compile_body(program, reader, body, inner))
        else:
            out_slots = [None if reader.dropped(edge) else program.slot() for edge in reader.outputs(op)]
            step = reader.step(op)
            if step is None:
                program.code.append((NESTED, op, in_slots, out_slots))
            else:
                program.code.append((OP, step, in_slots, out_slots))
        for edge, slot in zip(reader.outputs(op), out_slots):
            if slot is not None and not reader.dropped(edge):
                env[reader.key(edge)] = slot
    return [_slot(program, reader, env, edge) for edge in results]


def _slot(program: Program, reader: GraphReader, env: Dict[Hashable, int], edge: Any) -> int:
    """The slot of an edge (a literal operand reads its own literal slot); an edge nothing
    produced reads a literal ``None`` (no value, no id)."""
    literal = reader.literal(edge)
    if literal is not None:
        return program.literal(literal[0])
    key = reader.key(edge)
    slot = env.get(key)
    if slot is None:
        slot = env[key] = program.literal(None)
    return slot
