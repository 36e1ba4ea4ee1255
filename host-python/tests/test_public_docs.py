"""Every public definition a user reaches is documented: the names ``torchlens`` exports, the
classes of its public modules (traces, ops, recordings, validation, errors, edits, extraction,
the backend registry and the adapter protocol), and their public methods and properties."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import torchlens as tl

#: The modules whose public classes and functions users meet (directly or as return values).
PUBLIC_MODULES = (
    "torchlens",
    "torchlens.trace",
    "torchlens.recording",
    "torchlens.validation",
    "torchlens.errors",
    "torchlens.selectors",
    "torchlens.edits",
    "torchlens.edits.actions",
    "torchlens.edits.rules",
    "torchlens.extraction",
    "torchlens.options",
    "torchlens.backends",
    "torchlens.adapter_kit",
)


def _documented(value) -> bool:
    # inspect.getdoc, as help() and editors read it: an override inherits its base's docstring.
    return bool((inspect.getdoc(value) or "").strip())


def _public_definitions():
    seen = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [
            name for name in vars(module) if not name.startswith("_")
        ]
        for name in names:
            value = getattr(module, name, None)
            if inspect.ismodule(value) or not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if not getattr(value, "__module__", "").startswith("torchlens") or id(value) in seen:
                continue
            seen.add(id(value))
            yield f"{value.__module__}.{value.__qualname__}", value
            if inspect.isclass(value):
                # A dataclass field's default (a callable default included) is data, not an API.
                fields = (
                    {field.name for field in dataclasses.fields(value)}
                    if dataclasses.is_dataclass(value)
                    else set()
                )
                for member, attribute in vars(value).items():
                    if member.startswith("_") or member in fields:
                        continue
                    if isinstance(attribute, (staticmethod, classmethod)):
                        attribute = attribute.__func__
                    if isinstance(attribute, property):
                        yield f"{value.__module__}.{value.__qualname__}.{member}", attribute
                    elif inspect.isfunction(attribute):
                        # Read through the class, so an override finds its base's docstring.
                        yield f"{value.__module__}.{value.__qualname__}.{member}", getattr(value, member)


def test_every_public_definition_has_a_docstring():
    definitions = list(_public_definitions())
    assert len(definitions) > 300
    missing = [name for name, value in definitions if not _documented(value)]
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(missing)


def test_the_package_documents_itself():
    assert _documented(tl)
