"""Where a job's model comes from: a model object, or a factory that builds one where the work
runs (on each Ray actor, so a model need not be pickled and each worker owns its copy)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional


class ModelFactory:
    """Marks ``build`` (a callable taking no arguments) as a factory of the model, for
    callables that :func:`model_source` would not recognise on its own (a class, a callable
    object). A plain function or ``functools.partial`` with no required parameter is already
    taken as a factory."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build

    def __call__(self) -> Any:
        return self.build()

    def __repr__(self) -> str:
        return f"ModelFactory({_qualified_name(self.build)})"


@dataclass
class ModelSource:
    """A model, or the factory that makes it, and the description the index records."""

    model: Any
    factory: Optional[Callable[[], Any]]
    description: str

    def build(self) -> Any:
        """The model: the object given, or a new one from the factory."""
        return self.factory() if self.factory is not None else self.model


def model_source(model_or_factory: Any) -> ModelSource:
    """Tells a factory from a model. A factory is a :class:`ModelFactory`, or a plain function
    (or partial) that takes no required argument: a model that is a function (JAX) always
    takes its inputs, and a framework module is an object, not a function."""
    if isinstance(model_or_factory, ModelFactory):
        return ModelSource(None, model_or_factory.build, f"factory {_qualified_name(model_or_factory.build)}")
    if _is_zero_argument_function(model_or_factory):
        return ModelSource(None, model_or_factory, f"factory {_qualified_name(model_or_factory)}")
    return ModelSource(model_or_factory, None, _model_description(model_or_factory))


def _is_zero_argument_function(value: Any) -> bool:
    if not (inspect.isfunction(value) or isinstance(value, functools.partial)):
        return False
    try:
        parameters = inspect.signature(value).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        parameter.default is not inspect.Parameter.empty
        or parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        for parameter in parameters
    )


def _qualified_name(value: Any) -> str:
    if isinstance(value, functools.partial):
        return f"partial({_qualified_name(value.func)})"
    module = getattr(value, "__module__", None) or type(value).__module__
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{module}.{name}"


def _model_description(model: Any) -> str:
    if inspect.isfunction(model) or inspect.ismethod(model) or isinstance(model, functools.partial):
        return f"function {_qualified_name(model)}"
    return f"object {type(model).__module__}.{type(model).__qualname__}"
