"""Selectors: which ops to keep, match or edit. They are data; the core evaluates them.

``tl.func("relu") & tl.in_module("encoder")`` builds a small tree that is sent to the core as
an arena (children before parents), both for live decisions during capture and for queries on
a finished trace. The same selector can be written as text, the language of the ``tlspec`` CLI
and the viewer's search box (``"func:relu & in_module:encoder"``): the core parses it
(docs/core-contract.md 4.6), so the three hosts read one grammar.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from ._core import core
from .argument_checks import short_repr
from .errors import ArgumentError, SelectorError

Node = Tuple[str, Any]

# The term kinds of the text language (core-wasm/src/selectors/expression.rs): a string that
# starts with one of these and a colon is an expression, as is any string with an operator,
# a parenthesis, a quote, a comma or a space.
_EXPRESSION_KINDS = ("func", "label", "label_contains", "contains", "module", "in_module")
_EXPRESSION_CHARACTERS = frozenset('&|~()",') | frozenset(" \t\n")
_EXAMPLES = {"label": "linear_1_2", "module": "encoder.0", "in_module": "encoder"}


class Selector:
    """A selector. Combine with ``&``, ``|`` and ``~``."""

    def _emit(self, nodes: List[Node], predicates: List[Callable[..., object]]) -> int:
        raise NotImplementedError

    def arena(self) -> Tuple[List[Node], int]:
        """The flat form the core reads: ``(nodes, root)``."""
        nodes: List[Node] = []
        root = self._emit(nodes, [])
        return nodes, root

    def predicates(self) -> List[Callable[..., object]]:
        """Host-side predicates, in the order of their ``where`` ids."""
        found: List[Callable[..., object]] = []
        self._emit([], found)
        return found

    def __and__(self, other: Any) -> Selector:
        return _Composite("and", [self, as_selector(other)])

    def __or__(self, other: Any) -> Selector:
        return _Composite("or", [self, as_selector(other)])

    def __rand__(self, other: Any) -> Selector:
        return _Composite("and", [as_selector(other), self])

    def __ror__(self, other: Any) -> Selector:
        return _Composite("or", [as_selector(other), self])

    def __invert__(self) -> Selector:
        return _Not(self)

    def __bool__(self) -> bool:
        # ``tl.func("relu") and tl.func("linear")`` would silently be the second selector.
        raise SelectorError(
            "a selector has no truth value: Python's and, or and not would pick one selector "
            "instead of combining them",
            "selector_truth_value",
            "combine selectors with & (and), | (or) and ~ (not): tl.func('relu') & tl.in_module('encoder')",
        )

    def __repr__(self) -> str:
        return f"Selector{self.arena()}"


class _Leaf(Selector):
    def __init__(self, kind: str, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ArgumentError(
                f"tl.{kind}(...) takes a non-empty string, got {short_repr(value)}",
                "argument_invalid",
                f"pass the {kind} as text, e.g. tl.{kind}('{_EXAMPLES.get(kind, 'relu')}')",
            )
        self.kind = kind
        self.value = value

    def _emit(self, nodes, predicates):
        nodes.append((self.kind, self.value))
        return len(nodes) - 1


class _Composite(Selector):
    def __init__(self, kind: str, parts: List[Selector]) -> None:
        flat: List[Selector] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, _Composite) and part.kind == kind else [part])
        self.kind = kind
        self.parts = flat

    def _emit(self, nodes, predicates):
        children = [part._emit(nodes, predicates) for part in self.parts]
        nodes.append((self.kind, children))
        return len(nodes) - 1


class _Not(Selector):
    def __init__(self, inner: Selector) -> None:
        self.inner = inner

    def _emit(self, nodes, predicates):
        child = self.inner._emit(nodes, predicates)
        nodes.append(("not", child))
        return len(nodes) - 1


class _Temporal(Selector):
    def __init__(self, kind: str, first: Selector, other: Selector, within: int) -> None:
        if isinstance(within, bool) or not isinstance(within, int) or within < 1:
            raise ArgumentError(
                f"within must be a whole number of ops, at least 1; got {short_repr(within)}",
                "argument_invalid",
                "pass within=1 for the next (or previous) op, within=n for the n nearest",
            )
        self.kind, self.first, self.other, self.within = kind, as_selector(first), as_selector(other), within

    def _emit(self, nodes, predicates):
        first = self.first._emit(nodes, predicates)
        other = self.other._emit(nodes, predicates)
        nodes.append((self.kind, (first, other, self.within)))
        return len(nodes) - 1


class _Influence(Selector):
    def __init__(self, kind: str, seed: Any) -> None:
        self.kind, self.seed = kind, as_selector(seed)

    def _emit(self, nodes, predicates):
        seed = self.seed._emit(nodes, predicates)
        nodes.append((self.kind, seed))
        return len(nodes) - 1


class _Parsed(Selector):
    """A selector the core parsed from its text form: its checked arena, re-emitted with the
    child indices shifted to wherever it lands in a larger arena."""

    def __init__(self, expression: str, nodes: List[Node], root: int) -> None:
        self.expression, self.nodes, self.root = expression, nodes, root

    def _emit(self, nodes, predicates):
        base = len(nodes)
        for kind, payload in self.nodes:
            if kind in ("and", "or"):
                payload = [base + child for child in payload]
            elif kind in ("not", "downstream_of", "upstream_of"):
                payload = base + payload
            elif kind in ("followed_by", "preceded_by"):
                first, other, within = payload
                payload = (base + first, base + other, within)
            nodes.append((kind, payload))
        return base + self.root

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


class _Where(Selector):
    def __init__(self, predicate: Callable[..., object]) -> None:
        if not callable(predicate) or isinstance(predicate, type):
            raise ArgumentError(
                f"tl.where(...) takes a callable, got {short_repr(predicate)}",
                "argument_invalid",
                "pass a function of one op returning True or False: tl.where(lambda op: op.value.max() > 1)",
            )
        self.predicate = predicate

    def _emit(self, nodes, predicates):
        predicates.append(self.predicate)
        nodes.append(("where", len(predicates) - 1))
        return len(nodes) - 1


def parse_selector(expression: str) -> Selector:
    """A selector from its text form, parsed by the core: ``"func:relu & in_module:encoder"``,
    ``"followed_by(func:conv2d, func:relu, 2)"``, ``"~label:add_1_2:2 | module:block:2"``
    (the grammar of the ``tlspec`` CLI and the viewer, docs/core-contract.md 4.6; there a bare
    word means ``label_contains``). A malformed expression raises :class:`SelectorError`
    ``selector_expression_syntax`` with the byte position."""
    if not isinstance(expression, str):
        raise ArgumentError(
            f"tl.parse_selector takes a selector expression string, got {type(expression).__name__}",
            "argument_invalid",
            "pass text such as 'func:relu & in_module:encoder'",
        )
    nodes, root = core().parse_selector(expression)
    return _Parsed(expression, nodes, root)


def _is_expression(text: str) -> bool:
    if any(character in _EXPRESSION_CHARACTERS for character in text):
        return True
    kind, colon, rest = text.partition(":")
    # A label's only colon is its pass (``add_1_2:2``); any other ``word:value`` is a term, and
    # one of an unknown kind (``colour:red``) is the core's syntax error, not a label to miss.
    return bool(colon) and (kind in _EXPRESSION_KINDS or not rest.isdigit())


def func(name: str) -> Selector:
    """Ops whose function is ``name`` (``"relu"`` matches torch.relu, F.relu, Tensor.relu, nn.ReLU;
    ``"add"`` matches ``+``)."""
    return _Leaf("func", name)


def label(text: str) -> Selector:
    """The op with this label; a label without ``:pass`` matches every pass of its layer."""
    return _Leaf("label", text)


def label_contains(text: str) -> Selector:
    """Ops whose label contains ``text`` (case-insensitive)."""
    return _Leaf("label_contains", text)


def module(address: str) -> Selector:
    """The outputs of a module call: ``"block"`` every call, ``"block:2"`` the second."""
    return _Leaf("module", address)


def in_module(address: str) -> Selector:
    """Every op inside a module call, at any depth."""
    return _Leaf("in_module", address)


def followed_by(first: Selector, then: Selector, within: int = 1) -> Selector:
    """Ops matching ``first`` with an op matching ``then`` among the next ``within`` ops."""
    return _Temporal("followed_by", first, then, within)


def preceded_by(first: Selector, before: Selector, within: int = 1) -> Selector:
    """Ops matching ``first`` with an op matching ``before`` among the previous ``within`` ops."""
    return _Temporal("preceded_by", first, before, within)


def downstream_of(seed: Any) -> Selector:
    """Ops that an op matching ``seed`` reaches along the recorded dataflow edges: everything its
    value flows into, directly or through other ops, up to the outputs. ``seed`` is a selector
    or a label (``tl.downstream_of("conv2d_1_2")``). Strict: a seed op is included only when
    another seed op reaches it (``| seed`` adds the seeds). The reference's vocabulary
    (``tl.neighborhood(..., direction="downstream")``).

    Decided from the graph alone, so it works on every backend's traces, in ``trace.select``, in
    ``save=`` (each op is decided as soon as the core has it) and in ``intervene=`` /
    ``stop_after=`` rules; text form ``downstream_of(func:conv2d)``."""
    return _Influence("downstream_of", seed)


def upstream_of(seed: Any) -> Selector:
    """Ops that reach an op matching ``seed`` along the recorded dataflow edges: everything the
    seed's value was computed from, back to the inputs, constants and buffers. ``seed`` is a
    selector or a label. Strict, like :func:`downstream_of`.

    In ``save=`` an op is known to be upstream once a seed below it is recorded, and known not
    to be only when the capture ends (a later op could still read it): values wait until then,
    so this saves no peak memory over saving everything. ``intervene=`` and ``stop_after=``
    rules act as each op runs and refuse it (``selector_upstream_in_rule``); text form
    ``upstream_of(label:linear_1_3)``."""
    return _Influence("upstream_of", seed)


def where(predicate: Callable[..., bool]) -> Selector:
    """Ops for which ``predicate(op)`` is true (value-dependent: needs the op's value)."""
    return _Where(predicate)


def as_selector(value: Any) -> Selector:
    """A selector from what the public API accepts: a selector, a callable (``tl.where``), or a
    string. A string in the text language (``"func:relu & in_module:encoder"``: a
    ``kind:`` term, an operator, parentheses or spaces) is parsed by the core (:func:`parse_selector`);
    any other string is one label, exactly (``"linear_1_1"``, ``"add_1_2:2"``), as
    ``tl.label`` — unlike the CLI, where a bare word means ``label_contains``, since a label
    such as ``linear_1_1`` would there also match ``linear_1_10``."""
    if isinstance(value, Selector):
        return value
    if isinstance(value, str):
        return parse_selector(value) if _is_expression(value) else label(value)
    # A class is callable, but as a predicate it would be constructed with each op.
    if callable(value) and not isinstance(value, type):
        return _Where(value)
    raise ArgumentError(
        f"expected a selector, got {type(value).__name__} {short_repr(value)}",
        "argument_invalid",
        "pass a selector (tl.func('relu'), tl.label('linear_1_1'), ...), a selector expression "
        "string ('func:relu & in_module:encoder'), a label string, or a callable over an op",
    )
