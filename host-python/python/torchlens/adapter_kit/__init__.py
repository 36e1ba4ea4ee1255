"""The shared kit every adapter stands on: the request an adapter receives
(:class:`CaptureRequest`), the protocol it implements (:class:`BackendProtocol`), one capture's
lifecycle and payload store (:class:`CaptureSession`), wrapper installation that always undoes
itself (:class:`Patches`), the replay driver (:mod:`.replay`) and the array payload codec
(:mod:`.array_codec`). Nothing here imports a framework or the backend registry."""

from .protocol import BackendProtocol
from .request import CaptureRequest, SaveRequest
from .session import CaptureSession
from .wrappers import Patches

__all__ = ["BackendProtocol", "CaptureRequest", "CaptureSession", "Patches", "SaveRequest"]
