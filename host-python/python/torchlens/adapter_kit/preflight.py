"""The checks the kit runs on every capture request before the backend's ``capture`` sees it,
so that no backend can forget them and every backend refuses the same way, with a typed code
and before any side effect (the spec's "typed refusals"):

* ``grad_options`` must be the backend's own ``tl.backends.<name>.GradOptions``
  (``BackendProtocol.grad_options_type``), derived gradients do not combine with ``intervene=``
  or ``stop_after=`` (take them on a separate trace), and each ``input_grad_argnums`` position
  must name a floating array input (``BackendProtocol.grad_input`` and
  ``differentiable_input``);
* a gradient-site intervention (``direction="backward"``) needs a captured backward pass (the
  ``save_grads`` capability)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .request import CaptureRequest

if TYPE_CHECKING:  # the protocol calls this module: a runtime import would be a cycle
    from .protocol import BackendProtocol


def check_request(adapter: BackendProtocol, request: CaptureRequest) -> None:
    """Raises the adapter's typed refusal for a request the kit rules out; returns otherwise."""
    name = adapter.name
    grad_options = request.options.grad_options
    if grad_options is not None:
        expected = adapter.grad_options_type
        if expected is None or not isinstance(grad_options, expected):
            raise adapter.refuse(
                f"grad_options for the {name} backend must be tl.backends.{name}.GradOptions",
                "option_unsupported",
                f"pass tl.backends.{name}.GradOptions(loss_fn=...)",
            )
        if request.interventions or request.stop_after is not None:
            raise adapter.refuse(
                "grad_options cannot combine with intervene= or stop_after=",
                "option_unsupported",
                "take derived gradients in a separate tl.trace call",
            )
        for position in getattr(grad_options, "input_grad_argnums", ()):
            value = adapter.grad_input(request, position)
            if value is None or not adapter.differentiable_input(value):
                raise adapter.refuse(
                    f"input_grad_argnums names position {position}, which is not a floating "
                    f"{name} array argument",
                    "option_value_invalid",
                    "name the positions of floating array inputs, for example input_grad_argnums=(0,)",
                )
    if not adapter.capabilities.get("save_grads", False):
        for rule in request.interventions:
            if rule.direction == "backward":
                raise adapter.refuse(
                    "gradient-site interventions (direction='backward') need a captured backward pass",
                    "gradient_site_intervention_unsupported",
                    "edit forward values (leave direction unset), or use a backend that captures "
                    "backward passes (save_grads in tl.backends.get_spec(name).capabilities)",
                )
