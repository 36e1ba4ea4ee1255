"""What a backend supplies to the conformance suite: the four standard models in its own
framework, and how to build an array of it from NumPy (for the NaN and gradient tasks).

Each framework's module (``<backend>.py``, the one place that imports the framework) also holds
that framework's test battery, so every model the tests and the suite trace is
defined once; a standard model and a battery model of one kind are one class, sized by its
arguments."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

#: The standard models, in the order every scorecard lists them.
MODEL_NAMES = ("mlp", "cnn", "attention", "shared_module")
#: The submodule each standard model's module tasks pick (every backend names its layers so).
MODULES = {"mlp": "fc1", "cnn": "conv", "attention": "qkv", "shared_module": "block"}


@dataclass(frozen=True)
class StandardModel:
    """One standard model: ``build()`` returns ``(model, positional inputs)`` with fixed weights;
    ``func`` is a function the model calls, named as the backend records it (selection, edits
    and early stop pick it); ``module`` is the address of a submodule it calls."""

    name: str
    build: Callable[[], Tuple[Any, tuple]]
    func: str
    module: str


@dataclass(frozen=True)
class BackendModels:
    """A backend's part of the suite. ``to_array`` turns a NumPy array into a framework array;
    ``data_index`` is the position of the data input among the model's positional inputs (JAX
    functions take their parameters first); ``grad_options(model, args)`` builds the backend's
    derived-gradient request for the data input with a sum-of-outputs loss, and ``grad_key`` is
    the key its gradient lands under in ``trace.autograd.derived_grads``."""

    models: Tuple[StandardModel, ...]
    to_array: Callable[[Any], Any]
    grad_options: Callable[[Any, tuple], Any]
    grad_key: str = "inputs.0"
    data_index: int = 0


def models_of(backend: str) -> Optional[BackendModels]:
    """The backend's models, or None when it supplies none (its cells are then not_run)."""
    if importlib.util.find_spec(f"{__name__}.{backend}") is None:
        return None
    return importlib.import_module(f"{__name__}.{backend}").MODELS


def grad_options_class(backend: str) -> Any:
    """``tl.backends.<backend>.GradOptions``, or None where the backend has none yet (the
    derived-gradient task then asks anyway, and the capability gate answers)."""
    package = importlib.import_module(f"torchlens.backends.{backend}")
    return getattr(package, "GradOptions", None)


#: Each standard model's seed and input shape (channels first; ``channels_last`` moves the CNN's).
INPUTS = {
    "mlp": (0, (2, 3)),
    "cnn": (1, (1, 2, 5, 5)),
    "attention": (2, (1, 3, 4)),
    "shared_module": (3, (2, 4)),
}


def standard_models(
    build: Callable[[Callable[..., Any], int, Tuple[int, ...]], Callable[[], Tuple[Any, tuple]]],
    classes: Tuple[Callable[..., Any], ...],
    func: str,
    channels_last: bool = False,
) -> Tuple[StandardModel, ...]:
    """The four standard models: ``classes`` (classes, or classes with their sizes bound by
    ``functools.partial``) in :data:`MODEL_NAMES` order, each built by
    ``build(cls, seed, input_shape)`` (a builder), calling ``func`` and its submodule of
    :data:`MODULES`."""
    models = []
    for name, cls in zip(MODEL_NAMES, classes):
        seed, shape = INPUTS[name]
        if channels_last and name == "cnn":
            shape = (shape[0],) + shape[2:] + (shape[1],)
        models.append(StandardModel(name, build(cls, seed, shape), func, MODULES[name]))
    return tuple(models)


def input_grads(backend: str) -> Callable[[Any, tuple], Any]:
    """A ``grad_options`` builder asking the backend's ``GradOptions`` for the gradient of the
    first input after the parameters (the default loss, the sum of the outputs)."""

    def build(model: Any, args: tuple) -> Any:
        return grad_options_class(backend)(input_grad_argnums=(0,))

    return build
