"""The shared kit every adapter stands on: the request an adapter receives
(:class:`CaptureRequest`), the protocol it implements (:class:`BackendProtocol`), one capture's
lifecycle and payload store (:class:`CaptureSession`), selectors decided op by op as the
forward runs (:mod:`.live_plan`: the ``save=`` plan and :class:`LiveRule` for edit and stop
rules), wrapper installation that always undoes
itself (:class:`Patches`), the replay driver (:mod:`.replay`) and the array payload codec
(:mod:`.array_codec`). Nothing here imports a framework or the backend registry."""

from .live_plan import LiveRule
from .protocol import BackendProtocol
from .request import CaptureRequest, SaveRequest
from .session import CaptureSession
from .wrappers import Patches

__all__ = ["BackendProtocol", "CaptureRequest", "CaptureSession", "LiveRule", "Patches", "SaveRequest"]
