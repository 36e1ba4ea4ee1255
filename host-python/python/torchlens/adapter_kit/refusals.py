"""A backend's typed refusals, built one way for every backend: a ``BackendUnsupportedError``
with a code from ``tl.backends.REFUSAL_CODES``, a remedy, and the backend's name as its
``framework``. A backend's own ``refusals`` module makes one :class:`Refusals` and adds only the
refusals particular to its framework."""

from __future__ import annotations

from typing import Callable

from ..errors import BackendUnsupportedError

#: A declared refusal: called with the facts its message template takes.
Declared = Callable[..., BackendUnsupportedError]


class Refusals:
    """The typed refusals of the backend named ``framework``."""

    def __init__(self, framework: str) -> None:
        self.framework = framework

    def refuse(self, message: str, code: str, remedy: str) -> BackendUnsupportedError:
        """A refusal with ``code``."""
        return BackendUnsupportedError(message, code, remedy, framework=self.framework)

    def option(self, message: str, remedy: str) -> BackendUnsupportedError:
        """An option this backend does not implement (``option_unsupported``)."""
        return self.refuse(message, "option_unsupported", remedy)

    def value_invalid(self, message: str, remedy: str) -> BackendUnsupportedError:
        """An option value no backend could honour (``option_value_invalid``)."""
        return self.refuse(message, "option_value_invalid", remedy)

    def declare(self, message: str, code: str, remedy: str) -> Declared:
        """A refusal declared once: ``declare(message, code, remedy)(*facts)`` refuses with
        ``message`` formatted with ``facts`` (``str.format`` positions)."""

        def refusal(*facts: object) -> BackendUnsupportedError:
            return self.refuse(message.format(*facts), code, remedy)

        return refusal
