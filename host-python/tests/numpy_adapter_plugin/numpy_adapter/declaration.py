"""The NumPy test adapter's declaration (read through the ``torchlens.backends`` entry point)."""

from __future__ import annotations

from torchlens.backends import FrameworkRequirement
from torchlens.backends.spec import built_backend, detect_instances

SPEC = built_backend(
    "numpy",
    aliases=("np",),
    requirement=FrameworkRequirement("numpy", "1.24", "3.0", "2.4.6", "numpy"),
    # NumPy arrays are every framework's host arrays (JAX takes them as inputs): this adapter
    # does not claim them for routing; it takes the models that are its own Modules.
    array_modules=(),
    implemented={"save_selected": "numpy_adapter.adapter:NumpyAdapter.capture"},
    option_values={"module_identity_mode": ("object_module",), "payload_policy": ("array_payloads",)},
    adapter="numpy_adapter.adapter:NumpyAdapter",
    example="numpy_adapter.example:example",
    # Its own Modules (the class is read from sys.modules: whoever holds one imported it).
    detect=detect_instances("numpy_adapter.model:Module"),
)
