"""A backend's typed refusals, built one way for every backend: a ``BackendUnsupportedError``
with a code from ``tl.backends.REFUSAL_CODES``, a remedy, and the backend's name as its
``framework``. A backend's own ``refusals`` module makes one :class:`Refusals` and adds only the
refusals particular to its framework."""

from __future__ import annotations

from ..errors import BackendUnsupportedError


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
