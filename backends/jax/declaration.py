"""The JAX backend's declaration: read by the registry without importing jax."""

from __future__ import annotations

from ..spec import FrameworkRequirement, built_backend, detect_instances, preview_option_values

SPEC = built_backend(
    "jax",
    requirement=FrameworkRequirement("jax", "0.7.1", "0.11", "0.10.2", "jax"),
    array_modules=("jax", "jaxlib"),
    implemented={
        "save_selected": "torchlens.backends.jax.adapter:JaxAdapter.capture",
        "derived_grads": "torchlens.backends.jax.grads:derive",
    },
    option_values=preview_option_values("pytree_module"),
    adapter="torchlens.backends.jax.adapter:JaxAdapter",
    example="torchlens.backends.jax.example:example",
    # A model from jax, flax or equinox, or an Equinox or Flax NNX module (a user's subclass,
    # checked only when the caller imported that library). A plain callable given jax arrays is
    # routed by the registry's shared rule.
    detect=detect_instances(
        "equinox:Module", "flax.nnx:Module", type_modules=("jax", "jaxlib", "flax", "equinox")
    ),
)
