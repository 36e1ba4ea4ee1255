"""Running a compiled graph (:mod:`.graph_program`) op by op on concrete values, for a
graph-only entry: the :class:`~.program_import.ProgramImport` a backend subclasses, with what
every such import needs beside the framework's own op execution:

* compiled programs kept in the entry's :class:`~.program_cache.Entry` (a branch a conditional
  takes is compiled once, the first time it is taken);
* an output the op-by-op run cannot compute (behind a region replay cannot check) takes its
  value from one real run of the whole entry;
* an op that reads an array no op, input or capture produced makes its outputs unresolved
  (replay's self-consistency), and ops recorded without a replay call are counted;
* an op is run through the replay call the backend found for it (:meth:`GraphImport.call_op`),
  an output it cannot compute described from the graph's static types;
* a loop the framework runs around the whole entry is one region over its outputs
  (:meth:`GraphImport.loop_region`)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from .graph_program import GraphReader, compile_graph
from .program_cache import Entry
from .program_import import Pair, Program, ProgramImport
from .session import CaptureSession

#: How one op re-runs: ``(function, keyword arguments)``.
Call = Tuple[Callable[..., Any], dict]


class GraphImport(ProgramImport):
    """One import of a compiled graph. ``reader`` reads the framework's graphs, ``entry`` holds
    the compiled programs, ``outputs`` are the entry's result edges and ``run_entry()`` runs the
    whole entry once, giving its output values in the same order. A backend supplies
    :meth:`edge_type` (an edge's static shape and dtype) and, where not every dtype is a dense
    array it keeps, :attr:`dense_dtypes` and :attr:`kept_dtypes`."""

    #: Neutral dtypes whose values are dense arrays (None: every dtype): an input of such a
    #: dtype with no producer makes an op's outputs unresolved.
    dense_dtypes: Optional[frozenset] = None
    #: Neutral dtypes whose values the trace keeps (None: every dtype).
    kept_dtypes: Optional[frozenset] = None

    def __init__(
        self,
        session: CaptureSession,
        reader: GraphReader,
        entry: Entry,
        outputs: Sequence[Any],
        run_entry: Callable[[], List[Any]],
    ) -> None:
        super().__init__(session)
        self.reader = reader
        self.entry = entry
        #: Key of each result edge → its position among the entry's outputs.
        self.output_index = {reader.key(edge): index for index, edge in enumerate(outputs)}
        self.run_entry = run_entry
        self._ran: List[Any] = []
        #: Ops recorded without a replay call (opaque and control-flow regions).
        self.opaque = 0

    def entry_output(self, edge: Any) -> Optional[Any]:
        """The value of a result edge from one run of the whole entry (None for another edge)."""
        position = self.output_index.get(self.reader.key(edge))
        if position is None:
            return None
        if not self._ran:
            self._ran.extend(self.run_entry())
        return self._ran[position]

    def run_branch(self, key: Hashable, body: Callable[[], Any], ins: List[Pair]) -> Optional[List[Pair]]:
        """Runs a callee chosen at run time (``body()`` reads its graph, None when it cannot be
        read), compiled once per ``key``; None when it cannot be read."""
        programs: Dict[Hashable, Optional[Program]] = self.entry.programs
        if key not in programs:
            graph = body()
            programs[key] = None if graph is None else compile_graph(self.reader, graph)
        program = programs[key]
        return None if program is None else self.run_program(program, [], ins)

    def graph_op(
        self,
        name: str,
        ins: List[Pair],
        values: List[Any],
        described: List[Tuple[Sequence[int], str]],
        attributes: Sequence[Tuple[str, str]],
        call: Optional[Tuple[Callable[..., Any], dict]],
        unresolved: bool,
        keep: bool,
        reason: str,
    ) -> List[Pair]:
        """One op of the graph: replayed as ``call`` (``(function, keyword arguments)``, the
        inputs found there by identity), or opaque for ``reason`` when None. ``unresolved``: it
        read an array with no producer, so its outputs are unresolved."""
        pairs = self.op(
            name,
            ins,
            values,
            attributes,
            None if call is None else call[0],
            None if call is None else call[1],
            described,
            indexed=False,
            keep=keep,
            reason=reason,
        )
        if unresolved:
            self.unresolved.update(value_id for _, value_id in pairs if value_id is not None)
        if call is None:
            self.opaque += 1
        return pairs

    def edge_type(self, edge: Any) -> Tuple[Sequence[int], str]:
        """An edge's static shape (an unknown dimension, or an unknown rank, as what it can
        say: 0, or no dimensions) and neutral dtype, from the graph alone."""
        raise NotImplementedError

    def _dense(self, dtype: str) -> bool:
        return self.dense_dtypes is None or dtype in self.dense_dtypes

    def _kept(self, dtype: str) -> bool:
        return self.kept_dtypes is None or dtype in self.kept_dtypes

    def call_op(
        self,
        op: Any,
        name: str,
        ins: List[Pair],
        call_of: Optional[Callable[[], Optional[Call]]],
        attributes: Sequence[Tuple[str, str]],
        reason: str,
    ) -> List[Pair]:
        """One op of the graph run on the values of ``ins`` through the call ``call_of()``
        finds for it (None, or ``call_of`` None: it cannot run here). An op that cannot run, or
        fails, is opaque for ``reason``; each output it did not compute takes its value from
        the run of the whole entry where it is a result (:meth:`entry_output`), else has none
        and is described by the graph's static types."""
        call, results = None, None
        if call_of is not None:
            try:
                call = call_of()
                if call is not None:
                    out = call[0](**call[1])
                    results = list(out) if isinstance(out, (list, tuple)) else [out]
            except Exception:
                results = None
        values, described = [], []
        for index, edge in enumerate(self.reader.outputs(op)):
            value = results[index] if results is not None and index < len(results) else None
            value = self.entry_output(edge) if value is None else value
            values.append(value)
            shape, dtype = self.edge_type(edge)
            described.append((shape if value is None else tuple(value.shape), dtype))
        # Self-consistency: a dense input no imported op, input or capture produced.
        unresolved = any(
            value_id is None and self._dense(self.edge_type(edge)[1])
            for (_, value_id), edge in zip(ins, self.reader.inputs(op))
        )
        return self.graph_op(
            name,
            ins,
            values,
            described,
            attributes,
            call if results is not None else None,
            unresolved,
            keep=all(value is not None and self._kept(dtype) for value, (_, dtype) in zip(values, described)),
            reason=reason,
        )

    def loop_region(
        self, name: str, forward: List[Pair], attributes: Sequence[Tuple[str, str]], reason: str
    ) -> List[Pair]:
        """A loop the framework runs around the whole imported forward (batching, a data
        pipeline, a host copy of the result): one region reading the forward's outputs, whose
        values are the forward's (what the whole input as one batch gives). Replay cannot check
        it per op (``reason``); validation compares its outputs with a real call."""
        values = [self.values.get(value_id) if value_id is not None else value for value, value_id in forward]
        described = [self.describe(value) if value is not None else ((), "float32") for value in values]
        return self.graph_op(
            name,
            [(value, value_id) for value, (_, value_id) in zip(values, forward)],
            values,
            described,
            attributes,
            None,
            False,
            keep=all(value is not None for value in values),
            reason=reason,
        )

    def replayable(self) -> int:
        """How many recorded values replay can re-run (not opaque)."""
        return sum(1 for record in self.records.values() if not record.opaque)
