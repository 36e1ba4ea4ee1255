"""Capture by program: a backend whose framework traces the user's function to a program of
equations (each reads variables, literals or the outputs of earlier equations) has the kit walk
that program with real values, equation by equation, recording each one.

The backend reads its own program format through the hooks of :class:`ProgramWalk` (the parts
of a body, the operands and results of an equation, which operands are literals) and says what
each equation is: a plain op (a prepared :class:`~.program_import.Step`), a pure call whose body
is inlined, or control flow decided at run time (:class:`CountedLoop`, :class:`Branch`,
:class:`WhileLoop`; anything else it hands over is a region). The kit compiles each body once
onto a slot :class:`~.program_import.Program`, unrolls control flow within the options' cap
(``region`` mode, a loop over the cap or an empty counted loop records one region instead) and,
for an attributed module root, walks the top level itself so that
:class:`~.module_scopes.ModuleScopes` sees every equation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .graph_program import GraphReader, compile_graph
from .program_import import Pair, Program, ProgramImport, Step
from .session import CaptureSession

if TYPE_CHECKING:  # only named in a signature
    from .module_scopes import ModuleScopes


@dataclass
class CountedLoop:
    """A loop of ``length`` trips over the leading axis of each of ``xs`` (last slice first when
    ``reverse``): each trip runs ``body`` on ``consts``, the carry and one slice of each of
    ``xs``, and gives the next carry and its per-trip outputs. The loop's outputs are the final
    carry and each per-trip output stacked on a new leading axis."""

    length: int
    reverse: bool
    body: Any
    consts: List[Pair]
    carry: List[Pair]
    xs: List[Pair]


@dataclass
class Branch:
    """One of ``branches`` run on ``args``, chosen by the value ``index`` (clamped into range)."""

    index: Any
    branches: Sequence[Any]
    args: List[Pair]


@dataclass
class WhileLoop:
    """``body`` run on ``body_consts`` and the carry while ``test`` (on ``test_consts`` and the
    carry) holds; the loop's outputs are the final carry."""

    test: Any
    body: Any
    test_consts: List[Pair]
    body_consts: List[Pair]
    carry: List[Pair]


class ProgramWalk(ProgramImport):
    """One capture that walks a traced program. ``mode`` is the control-flow option
    (``"unroll"``: loops and branches unrolled, a loop over ``cap`` trips a region;
    ``"region"``: every control-flow equation one region; ``"reject"`` was refused before the
    walk). ``prepared`` (a :class:`~.program_cache.Entry`) shares prepared steps and compiled
    programs across captures of one cached program."""

    #: The recorded names of a counted loop's per-trip slice and of its stacked outputs.
    slice_op_name = "slice"
    stack_op_name = "stack"

    def __init__(self, session: CaptureSession, mode: str, cap: int, prepared: Any = None) -> None:
        super().__init__(session)
        self.mode = mode
        self.cap = cap
        #: Prepared plain equations (by ``id``) and compiled programs (by ``id`` of each body).
        self.steps: Dict[int, Step] = {} if prepared is None else prepared.steps
        self.programs: Dict[int, Program] = {} if prepared is None else prepared.programs
        #: Module attribution of an attributed root: the top level is walked equation by
        #: equation so that it sees each one (None: no attribution).
        self.scopes: Optional[ModuleScopes] = None

    # ---- the backend's reading of its program -------------------------------------------------

    def unclose(self, body: Any) -> Tuple[Any, Sequence[Any]]:
        """A body and the constant values it closes over (none for an open body)."""
        raise NotImplementedError

    def parts(self, body: Any) -> Tuple[Sequence[Any], Sequence[Any], Sequence[Any], Sequence[Any]]:
        """An open body's constant variables, input variables, output atoms and equations."""
        raise NotImplementedError

    def equation_vars(self, equation: Any) -> Tuple[Sequence[Any], Sequence[Any]]:
        """An equation's operand atoms and result variables."""
        raise NotImplementedError

    def literal(self, atom: Any) -> Optional[Tuple[Any]]:
        """``(value,)`` for an atom that is a literal, None for a variable."""
        raise NotImplementedError

    def dropped(self, var: Any) -> bool:
        """Whether a result variable is never read (it gets no slot)."""
        return False

    def prepare(self, equation: Any) -> Step:
        """A plain equation prepared once (cached by the kit, per program)."""
        raise NotImplementedError

    def inlined(self, equation: Any, ins: List[Any]) -> Tuple[Any, List[Any]]:
        """The body of a pure call (its value is the body's) and which of ``ins`` (slots at
        compile time, pairs at run time) are its arguments, or ``(None, [])``."""
        return None, []

    def walked(self, equation: Any) -> bool:
        """Whether an equation is control flow or a region, decided at run time by
        :meth:`control` (otherwise it is a plain op)."""
        return False

    def control(self, equation: Any, ins: List[Pair]) -> Any:
        """A walked equation as a :class:`CountedLoop`, :class:`Branch` or :class:`WhileLoop`;
        None records it as one region."""
        return None

    def region_parts(
        self, equation: Any
    ) -> Tuple[
        str, Callable[..., list], Sequence[Tuple[str, str]], Callable[[int], Tuple[Sequence[int], str]]
    ]:
        """What :meth:`~.program_import.ProgramImport.region` records for an equation: its name,
        the call that runs it, its attributes and how to describe an output without a value."""
        raise NotImplementedError

    def as_function(self, body: Any) -> Callable[..., list]:
        """A closed body as a function of values (a while loop's trips are counted with it,
        recording nothing)."""
        raise NotImplementedError

    def slicer(self, index: int) -> Callable[[Any], list]:
        """What replay calls for a counted loop's slice ``index`` (``[the slice]``)."""
        raise NotImplementedError

    def stacker(self, *values: Any) -> list:
        """A counted loop's per-trip outputs stacked on a new leading axis (``[the stack]``)."""
        raise NotImplementedError

    # ---- compiling ----------------------------------------------------------------------------

    def step_of(self, equation: Any) -> Step:
        """The prepared step of a plain equation."""
        step = self.steps.get(id(equation))
        if step is None:
            step = self.steps[id(equation)] = self.prepare(equation)
        return step

    def compile(self, body: Any) -> Program:
        """An open body compiled onto a slot program by the kit's one program compiler
        (:func:`~.graph_program.compile_graph`, reading the body through :class:`WalkReader`):
        pure calls inlined, each plain equation one prepared step, each walked equation one
        instruction handed to :meth:`nested`."""
        return compile_graph(WalkReader(self), body)

    # ---- running --------------------------------------------------------------------------------

    def run(self, body: Any, consts: Sequence[Pair], args: Sequence[Pair], top: bool = False) -> List[Pair]:
        """Evaluates an open ``body`` on ``consts`` and ``args``, recording every equation;
        returns its outputs as pairs. ``top``: the root's own body (walked under
        :attr:`scopes` when the root is attributed)."""
        if top and self.scopes is not None:
            return self._walk(body, consts, args)
        program = self.programs.get(id(body))
        if program is None:
            program = self.programs[id(body)] = self.compile(body)
        return self.run_program(program, consts, args)

    def run_closed(self, closed: Any, args: Sequence[Pair]) -> List[Pair]:
        """Evaluates a closed body: its constants are declared first."""
        body, values = self.unclose(closed)
        consts = [self.constant(value) for value in values]
        return self.run(body, consts, args)

    def _walk(self, body: Any, consts: Sequence[Pair], args: Sequence[Pair]) -> List[Pair]:
        """The top level of an attributed root, walked equation by equation: the scopes read
        the environment of variables before each equation."""
        constvars, invars, outvars, equations = self.parts(body)
        env: Dict[Any, Pair] = dict(zip(constvars, consts))
        env.update(zip(invars, args))

        def read(atom: Any) -> Pair:
            literal = self.literal(atom)
            return (literal[0], None) if literal is not None else env[atom]

        scopes = self.scopes
        assert scopes is not None  # run walks only an attributed root's top level
        scopes.start(body)
        for index, equation in enumerate(equations):
            scopes.before(equation, index, env)
            operands, results = self.equation_vars(equation)
            outs = self.equation(equation, [read(atom) for atom in operands])
            for var, pair in zip(results, outs):
                if not self.dropped(var):
                    env[var] = pair
        scopes.close(env)
        return [read(atom) for atom in outvars]

    def equation(self, equation: Any, ins: List[Pair]) -> List[Pair]:
        """Runs one equation on ``ins`` (outside a compiled program)."""
        inner, inner_args = self.inlined(equation, ins)
        if inner is not None:
            return self.run_closed(inner, inner_args)
        if self.walked(equation):
            return self.nested(equation, ins)
        step = self.step_of(equation)
        values = step.run([value for value, _ in ins], self.fast)
        return self.op(step.name, ins, values, step.attributes, step.replay)

    def nested(self, item: Any, ins: List[Pair]) -> List[Pair]:
        """A walked equation (``item``): its control flow unrolled, or one region."""
        equation = item
        flow = None if self.mode == "region" else self.control(equation, ins)
        if isinstance(flow, CountedLoop) and 0 < flow.length <= self.cap:
            return self._counted(flow)
        if isinstance(flow, Branch):
            index = min(max(int(flow.index), 0), len(flow.branches) - 1)
            return self.run_closed(flow.branches[index], flow.args)
        if isinstance(flow, WhileLoop):
            carry = self._while(flow)
            if carry is not None:
                return carry
        name, call, attributes, describe_missing = self.region_parts(equation)
        return self.region(name, ins, call, attributes, describe_missing)

    def _counted(self, flow: CountedLoop) -> List[Pair]:
        body, values = self.unclose(flow.body)
        body_consts = [self.constant(value) for value in values]
        trips = range(flow.length - 1, -1, -1) if flow.reverse else range(flow.length)
        carry = list(flow.carry)
        count = len(carry)
        per_trip: List[List[Tuple[int, Pair]]] = []
        for trip in trips:
            slices: List[Pair] = []
            for x in flow.xs:
                slicer = self.slicer(trip)
                attributes = [("index", str(trip))]
                slices.extend(self.op(self.slice_op_name, [x], slicer(x[0]), attributes, slicer))
            outs = self.run(body, body_consts, list(flow.consts) + carry + slices)
            carry = outs[:count]
            for position, y in enumerate(outs[count:]):
                if len(per_trip) <= position:
                    per_trip.append([])
                per_trip[position].append((trip, y))
        stacked: List[Pair] = []
        for entries in per_trip:
            ordered = [pair for _, pair in sorted(entries, key=lambda entry: entry[0])]
            values = self.stacker(*[value for value, _ in ordered])
            stacked.extend(self.op(self.stack_op_name, ordered, values, [], self.stacker))
        return carry + stacked

    def _while(self, flow: WhileLoop) -> Optional[List[Pair]]:
        """The loop unrolled, or None when it runs more than the cap's trips (a region)."""
        # Count the trips first, values only, so an over-cap loop records nothing per trip.
        test_fn, body_fn = self.as_function(flow.test), self.as_function(flow.body)
        test_values = [value for value, _ in flow.test_consts]
        body_values = [value for value, _ in flow.body_consts]
        values = [value for value, _ in flow.carry]
        trips = 0
        while trips <= self.cap and bool(test_fn(*test_values, *values)[0]):
            values = body_fn(*body_values, *values)
            trips += 1
        if trips > self.cap:
            return None
        # Unroll: each trip records the loop test that admitted it and the body; the final,
        # failing test is recorded too, so the test's ops are in the graph.
        test, test_closure = self.unclose(flow.test)
        body, body_closure = self.unclose(flow.body)
        test_consts = [self.constant(value) for value in test_closure]
        inner_consts = [self.constant(value) for value in body_closure]
        carry = list(flow.carry)
        for _ in range(trips):
            self.run(test, test_consts, list(flow.test_consts) + carry)
            carry = self.run(body, inner_consts, list(flow.body_consts) + carry)
        self.run(test, test_consts, list(flow.test_consts) + carry)
        return carry


class WalkReader(GraphReader):
    """A walk's program of equations as the kit's program compiler reads it: variables are the
    edges (an equation's operands may be literals, its unread results are dropped), every
    equation is kept (a variable does not know the equation that produced it), a pure call's
    body is inlined with the constants it closes over, a plain equation is its prepared step."""

    prunes = False

    def __init__(self, walk: ProgramWalk) -> None:
        self.walk = walk

    def ops(self, graph: Any) -> Sequence[Any]:
        return self.walk.parts(graph)[3]

    def inputs(self, op: Any) -> Sequence[Any]:
        return self.walk.equation_vars(op)[0]

    def outputs(self, op: Any) -> Sequence[Any]:
        return self.walk.equation_vars(op)[1]

    def key(self, edge: Any) -> Any:
        return edge

    def constants(self, graph: Any) -> Sequence[Any]:
        return self.walk.parts(graph)[0]

    def parameters(self, graph: Any) -> Sequence[Any]:
        return self.walk.parts(graph)[1]

    def results(self, graph: Any) -> Sequence[Any]:
        return self.walk.parts(graph)[2]

    def literal(self, edge: Any) -> Optional[Tuple[Any]]:
        return self.walk.literal(edge)

    def dropped(self, edge: Any) -> bool:
        return self.walk.dropped(edge)

    def step(self, op: Any) -> Optional[Step]:
        return None if self.walk.walked(op) else self.walk.step_of(op)

    def inline(self, op: Any, in_slots: List[int]) -> Optional[Tuple[Any, List[int], Sequence[Any]]]:
        inner, arguments = self.walk.inlined(op, in_slots)
        if inner is None:
            return None
        body, consts = self.walk.unclose(inner)
        return body, arguments, consts
