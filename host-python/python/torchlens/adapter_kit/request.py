"""The one object an adapter receives for a capture. The package's entry points build it after
routing, gating, checking options and classifying selectors, so an adapter never repeats those
checks and never reaches back into the registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ..options import CaptureOptions
from ..selectors import Selector
from .live_edits import selector_kinds

SAVE_MODES = ("all", "none", "selected")


@dataclass(frozen=True)
class SaveRequest:
    """Which values the trace keeps: ``all`` (``save=None``/``True``), ``none``
    (``save=False``) or ``selected`` (a selector, decided live: by the core's plan, or by the
    adapter on each value when it is value-dependent)."""

    mode: str = "all"
    selector: Optional[Selector] = None

    @classmethod
    def from_argument(cls, save: Any, selector: Optional[Selector]) -> SaveRequest:
        """The request for ``tl.trace``'s ``save=`` argument (its selector already parsed)."""
        if save is None or save is True:
            return cls("all")
        if save is False:
            return cls("none")
        return cls("selected", selector)

    @property
    def value_dependent(self) -> bool:
        """Whether the selector needs each op's value (``tl.where``, a callable): the adapter
        decides it live (see :class:`~torchlens.adapter_kit.live_edits.LiveEdits`)."""
        if self.selector is None:
            return False
        return "where" in selector_kinds(self.selector)


@dataclass(frozen=True)
class CaptureRequest:
    """Everything one capture needs, checked: the backend's spec, the call, the options, the
    save request, the live edit rules (``intervene=``) and the stop rule (``stop_after=``)."""

    spec: Any
    model: Any
    args: Tuple[Any, ...]
    kwargs: dict
    options: CaptureOptions
    save: SaveRequest = SaveRequest()
    interventions: Tuple[Any, ...] = ()
    stop_after: Any = None
    facets: Any = None
    #: ``save_grads=``: None (off), True (every op) or a selector; gated before it gets here.
    save_grads: Any = None
    #: :class:`~torchlens.options.StreamingOptions` when ``streaming=`` asked for a streamed save.
    streaming: Any = None

    @property
    def framework(self) -> str:
        """The backend's name, for messages."""
        return self.spec.name
