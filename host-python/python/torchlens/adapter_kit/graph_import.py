"""Running a compiled graph (:mod:`.graph_program`) op by op on concrete values, for a
graph-only entry: the :class:`~.program_import.ProgramImport` a backend subclasses, with what
every such import needs beside the framework's own op execution:

* compiled programs kept in the entry's :class:`~.program_cache.Entry` (a branch a conditional
  takes is compiled once, the first time it is taken);
* an output the op-by-op run cannot compute (behind a region replay cannot check) takes its
  value from one real run of the whole entry;
* an op that reads an array no op, input or capture produced makes its outputs unresolved
  (replay's self-consistency), and ops recorded without a replay call are counted."""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from .graph_program import GraphReader, compile_graph
from .program_cache import Entry
from .program_import import Pair, Program, ProgramImport
from .session import CaptureSession


class GraphImport(ProgramImport):
    """One import of a compiled graph. ``reader`` reads the framework's graphs, ``entry`` holds
    the compiled programs, ``outputs`` are the entry's result edges and ``run_entry()`` runs the
    whole entry once, giving its output values in the same order."""

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

    def replayable(self) -> int:
        """How many recorded values replay can re-run (not opaque)."""
        return sum(1 for record in self.records.values() if not record.opaque)
