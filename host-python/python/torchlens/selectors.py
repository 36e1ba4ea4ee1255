"""Selectors: which ops to keep, match or edit. They are data; the core evaluates them.

``tl.func("relu") & tl.in_module("encoder")`` builds a small tree that is sent to the core as
an arena (children before parents), both for live decisions during capture and for queries on
a finished trace.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from .errors import SelectorError

Node = Tuple[str, Any]


class Selector:
    """A selector. Combine with ``&``, ``|`` and ``~``."""

    def _emit(self, nodes: List[Node], predicates: List[Callable[..., bool]]) -> int:
        raise NotImplementedError

    def arena(self) -> Tuple[List[Node], int]:
        """The flat form the core reads: ``(nodes, root)``."""
        nodes: List[Node] = []
        root = self._emit(nodes, [])
        return nodes, root

    def predicates(self) -> List[Callable[..., bool]]:
        """Host-side predicates, in the order of their ``where`` ids."""
        found: List[Callable[..., bool]] = []
        self._emit([], found)
        return found

    def __and__(self, other: Selector) -> Selector:
        return _Composite("and", [self, _as_selector(other)])

    def __or__(self, other: Selector) -> Selector:
        return _Composite("or", [self, _as_selector(other)])

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
            raise TypeError(f"tl.{kind}(...) takes a non-empty string, got {value!r}")
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
        if within < 1:
            raise ValueError("within must be at least 1")
        self.kind, self.first, self.other, self.within = kind, first, _as_selector(other), within

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


class _Where(Selector):
    def __init__(self, predicate: Callable[..., bool]) -> None:
        if not callable(predicate):
            raise TypeError("tl.where(...) takes a callable")
        self.predicate = predicate

    def _emit(self, nodes, predicates):
        predicates.append(self.predicate)
        nodes.append(("where", len(predicates) - 1))
        return len(nodes) - 1


def _as_selector(value: Any) -> Selector:
    if isinstance(value, Selector):
        return value
    if callable(value):
        return _Where(value)
    raise TypeError(f"expected a selector, got {value!r}")


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
    """Accepts a selector, a label string or a callable."""
    if isinstance(value, str):
        return label(value)
    return _as_selector(value)
