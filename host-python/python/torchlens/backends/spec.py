"""What a backend declares: its name, framework requirement, maturity, capability table and how
to load it (``BackendSpec``). A declaration imports no framework, so the registry can list every
backend without importing one."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..errors import BackendUnsupportedError

MATURITIES = ("stable", "preview", "planned")


@dataclass(frozen=True)
class FrameworkRequirement:
    """Which framework a backend needs: the import name, the supported range
    ``[minimum, ceiling)``, the version CI pins, and the install extra."""

    module: str
    minimum: str
    ceiling: str
    pinned: str
    extra: str


@dataclass(frozen=True)
class BackendSpec:
    """A backend's declaration. ``protocol()`` imports the adapter (and so its framework) and
    returns its :class:`~torchlens.backends.BackendProtocol` object."""

    name: str
    aliases: Tuple[str, ...]
    maturity: str
    requirement: FrameworkRequirement
    #: Root modules of the framework's array types (``tensorflow``, ``keras`` for TF), used to
    #: tell which framework the inputs belong to.
    array_modules: Tuple[str, ...] = ()
    #: Capability name → flag; unlisted capabilities are False.
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    #: Capability name → the callable that implements it.
    capability_implementations: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    #: CaptureOptions field → the values the backend implements (None, the default, always
    #: passes); any other value refuses at the door with ``option_unsupported``.
    option_values: Mapping[str, Tuple[Any, ...]] = field(default_factory=dict)
    #: ``module:attribute`` of the adapter's protocol class (None for a backend not built yet).
    adapter: Optional[str] = None
    #: ``module:attribute`` of a function returning a small model of the framework and its
    #: positional inputs (the backend page's tutorial model); the shared contract tests and the
    #: conformance suite run every backend on it.
    example: Optional[str] = None
    #: Cheap check, without importing the framework, that a model belongs to this backend.
    detect: Optional[Callable[[Any, Any], bool]] = None

    def declaration(self) -> tuple:
        """What the core's gate reads."""
        return (
            self.name,
            sorted(self.capabilities.items()),
            sorted(self.capability_implementations),
        )

    def protocol(self) -> Any:
        """The backend's protocol object, built from its adapter class (imports its framework)."""
        if self.adapter is None:
            raise BackendUnsupportedError(
                f"the {self.name} backend is {self.maturity}: not built into this release yet",
                "backend_not_built",
                "use backend='torch', or follow the project for the backend's release",
                framework=self.name,
            )
        return resolve_reference(self.adapter)(self)


def resolve_reference(reference: str) -> Any:
    """The object a ``module:attribute.path`` reference names (imported now)."""
    module_name, attribute = reference.split(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def implemented_by(reference: str) -> Callable[..., Any]:
    """A capability implementation named by ``module:attribute``, resolved when first called so a
    declaration imports no framework."""

    def implementation(*args: Any, **kwargs: Any) -> Any:
        return resolve_reference(reference)(*args, **kwargs)

    implementation.__name__ = reference.rsplit(":", 1)[-1]
    implementation.__qualname__ = reference
    return implementation


#: Capabilities the package implements for every built backend (see ``package_implementations``).
PACKAGE_CAPABILITIES = ("select_by_function", "select_by_module", "draw", "validation_replay")


def package_capabilities(**flags: bool) -> dict:
    """A capability table: the package's own capabilities flagged True, plus ``flags``."""
    return {**dict.fromkeys(PACKAGE_CAPABILITIES, True), **flags}


def package_implementations() -> dict:
    """The capabilities the package itself implements for every built backend: selection and
    drawing on a finished trace, and replay validation through the shared driver."""
    return {
        "select_by_function": implemented_by("torchlens.trace:Trace.select"),
        "select_by_module": implemented_by("torchlens.trace:Trace.select"),
        "draw": implemented_by("torchlens.trace:Trace.draw"),
        "validation_replay": implemented_by("torchlens.adapter_kit.replay:validation_status"),
    }


def preview_option_values(module_mode: str) -> Dict[str, Tuple[str, ...]]:
    """The option values a preview backend implements: ``function_root`` and its own structured
    ``module_identity_mode`` (``object_module`` for frameworks with module objects,
    ``pytree_module`` for JAX), and array payloads."""
    return {
        "module_identity_mode": ("function_root", module_mode),
        "payload_policy": ("array_payloads",),
    }


def built_backend(
    name: str,
    *,
    requirement: FrameworkRequirement,
    implemented: Mapping[str, str],
    adapter: str,
    example: Optional[str] = None,
    detect: Optional[Callable[[Any, Any], bool]] = None,
    array_modules: Tuple[str, ...] = (),
    aliases: Tuple[str, ...] = (),
    option_values: Optional[Mapping[str, Tuple[Any, ...]]] = None,
    maturity: str = "preview",
) -> BackendSpec:
    """The declaration of a built backend. ``implemented`` maps each capability the backend
    adds to the package's own (see ``PACKAGE_CAPABILITIES``) to the ``module:attribute`` that
    implements it; every capability not named is False, so a request for it refuses with its
    code."""
    return BackendSpec(
        name=name,
        aliases=aliases,
        maturity=maturity,
        requirement=requirement,
        array_modules=array_modules,
        capabilities=package_capabilities(**dict.fromkeys(implemented, True)),
        capability_implementations={
            **package_implementations(),
            **{capability: implemented_by(reference) for capability, reference in implemented.items()},
        },
        option_values=dict(option_values or {}),
        adapter=adapter,
        example=example,
        detect=detect,
    )


def planned_backend(
    name: str,
    module: str,
    versions: Tuple[str, str, str],
    extra: str,
    array_modules: Tuple[str, ...],
    aliases: Tuple[str, ...] = (),
) -> BackendSpec:
    """The declaration of a backend that is not built yet: it routes models of its framework and
    names its install extra, and every request refuses with ``backend_not_built``.
    ``versions`` is ``(minimum, ceiling, pinned)``."""
    minimum, ceiling, pinned = versions
    return BackendSpec(
        name=name,
        aliases=aliases,
        maturity="planned",
        requirement=FrameworkRequirement(module, minimum, ceiling, pinned, extra),
        array_modules=array_modules,
        detect=detect_by_type_module(*array_modules),
    )


def detect_by_type_module(*roots: str) -> Callable[[Any, Any], bool]:
    """A detector that votes for models whose type lives in one of these root modules."""

    def detect(model: Any, inputs: Any) -> bool:
        return type(model).__module__.split(".", 1)[0] in roots

    return detect


def detect_instances(*classes: str, type_modules: Tuple[str, ...] = ()) -> Callable[[Any, Any], bool]:
    """A detector that votes for models that are instances of one of these classes (a user's
    subclass included), each named ``module:attribute.path``, or whose type lives in one of the
    root modules ``type_modules``. The classes are read from ``sys.modules`` only: routing never
    imports a framework the caller has not (Paddle crashes when first imported after
    TensorFlow)."""
    by_type_module = detect_by_type_module(*type_modules)

    def detect(model: Any, inputs: Any) -> bool:
        if by_type_module(model, inputs):
            return True
        for reference in classes:
            module_name, attribute = reference.split(":")
            target: Any = sys.modules.get(module_name)
            for part in attribute.split("."):
                target = getattr(target, part, None)
            if isinstance(target, type) and isinstance(model, target):
                return True
        return False

    return detect
