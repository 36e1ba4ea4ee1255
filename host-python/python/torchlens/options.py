"""Capture options shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .errors import BackendUnsupportedError, UnsupportedError

JAX_CONTROL_FLOW_MODES = ("unroll", "region", "reject")
MODULE_IDENTITY_MODES = (None, "object_module", "function_root", "pytree_module")
PAYLOAD_POLICIES = (None, "array_payloads")


@dataclass(frozen=True)
class CaptureOptions:
    """How a capture runs.

    ``recurrence_detection`` groups repeated calls of one module into passes of one layer;
    ``compute_input_output_distances`` records hop distances and ancestor/descendant sets. The
    remaining fields are read by the preview backends; torch accepts them as inert inputs.
    """

    recurrence_detection: bool = True
    compute_input_output_distances: bool = True
    jax_control_flow: str = "unroll"
    jax_max_control_flow_unroll: int = 1024
    module_identity_mode: Optional[str] = None
    payload_policy: Optional[str] = None
    grad_options: Any = None
    #: Prepare the trace for a true backward capture (the reference's name); refused with
    #: ``backward_ready_unsupported`` where the backend has no backward capture.
    backward_ready: bool = False
    #: Save each op's output gradient when the user's own ``loss.backward()`` runs (the
    #: reference's name): ``True`` for every op, or a selector for some. Refused with
    #: ``save_grads_unsupported`` where the backend has no backward capture. ``tl.trace``'s
    #: ``save_grads=`` keyword sets the same thing.
    save_grads: Any = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.jax_control_flow not in JAX_CONTROL_FLOW_MODES:
            raise BackendUnsupportedError(
                f"jax_control_flow must be one of {JAX_CONTROL_FLOW_MODES}",
                "option_value_invalid",
                "pass one of the listed values",
            )
        if not isinstance(self.jax_max_control_flow_unroll, int) or self.jax_max_control_flow_unroll < 0:
            raise BackendUnsupportedError(
                "jax_max_control_flow_unroll must be a non-negative int",
                "option_value_invalid",
                "pass the largest number of loop trips to unroll, for example 1024",
            )
        if self.module_identity_mode not in MODULE_IDENTITY_MODES:
            raise BackendUnsupportedError(
                f"module_identity_mode must be one of {MODULE_IDENTITY_MODES}",
                "option_value_invalid",
                "pass one of the listed values",
            )
        if self.payload_policy not in PAYLOAD_POLICIES:
            raise BackendUnsupportedError(
                f"payload_policy must be one of {PAYLOAD_POLICIES}",
                "option_value_invalid",
                "pass one of the listed values",
            )


@dataclass(frozen=True)
class StreamingOptions:
    """Write the trace's saved values to ``path`` while the forward runs (the reference's name;
    ``bundle_path`` is its spelling of ``path``). Each value goes to a spool file beside ``path``
    as it is computed and is released at once, so memory stays near one op's values; when the
    forward returns, the ``.tlspec`` is assembled from the spool and renamed into place, and the
    returned trace reads its values lazily from that file. If the forward raises, or the process
    dies, no file appears under ``path`` (docs/python-package.md, "Streaming saves").

    ``source_paths`` is as for :meth:`~torchlens.trace.Trace.save`."""

    path: Optional[str] = None
    source_paths: str = "relative"
    bundle_path: Optional[str] = None

    def __post_init__(self) -> None:
        if self.path is not None and self.bundle_path is not None and self.path != self.bundle_path:
            raise UnsupportedError(
                "StreamingOptions got both path and bundle_path, and they differ",
                "streaming_path_invalid",
                "pass one of them (path is TorchLens's name, bundle_path the reference's)",
            )
        if self.target is None or not str(self.target):
            raise UnsupportedError(
                "StreamingOptions needs the path of the .tlspec file to write",
                "streaming_path_invalid",
                'pass StreamingOptions(path="run.tlspec")',
            )

    @property
    def target(self) -> Optional[str]:
        """The file the stream ends in."""
        chosen = self.path if self.path is not None else self.bundle_path
        return None if chosen is None else str(chosen)
