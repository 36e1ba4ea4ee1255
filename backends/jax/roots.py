"""What is being traced: a raw callable ``fn(params, *inputs)`` or a module root (Equinox,
Flax NNX), its array leaves (parameters and inputs, with their paths), and a flat function of
those leaves that ``jax.make_jaxpr`` can trace."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, List, Optional, Tuple

import jax
import numpy as np

from torchlens.adapter_kit.argument_names import argument_names
from torchlens.adapter_kit.program_cache import function_anchors
from torchlens.argument_checks import short_repr
from torchlens.errors import ArgumentError

from .refusals import refuse

_JAX_FOLDER = os.path.dirname(os.path.realpath(jax.__file__)) + os.sep
#: Modules whose callables are transforms of a user function.
_TRANSFORM_MODULES = (
    "jax.",
    "jaxlib.",
    "equinox._jit",
    "equinox._vmap_pmap",
    "equinox._ad",
    "flax.nnx.transforms",
)


def key_name(entry: Any) -> str:
    for attribute in ("key", "name", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def path_name(path: tuple) -> str:
    """``layers.0.weight`` for the key path ``.layers[0].weight``."""
    return ".".join(key_name(entry) for entry in path)


def is_dynamic(leaf: Any) -> bool:
    """Array leaves are traced; every other leaf (Python numbers, functions, strings) is static."""
    return isinstance(leaf, (jax.Array, np.ndarray))


def framework_of(model: Any) -> Optional[str]:
    """``equinox`` or ``flax_nnx`` for a module root, None for a raw callable. Reads only
    modules the caller has already imported."""
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(model, eqx.Module) and not _is_transform(model):
        return "equinox"
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(model, nnx.Module):
        return "flax_nnx"
    return None


def _is_transform(model: Any) -> bool:
    return type(model).__module__.startswith(_TRANSFORM_MODULES)


@functools.lru_cache(maxsize=1024)
def _in_jax(filename: str) -> bool:
    """Whether a source file is part of JAX (resolved once per file: every capture asks)."""
    return os.path.realpath(filename).startswith(_JAX_FOLDER)


def _jax_transform_function(function: Any, depth: int = 0) -> bool:
    """Whether a Python function is one a jax transform returned (``vmap_f``, ``grad_f``,
    ``jacfun`` ...). JAX wraps both its transforms and some library entry points (Flax's
    ``Module.apply``) in a traceback-filtering wrapper; the wrapped function tells them apart."""
    code = getattr(function, "__code__", None)
    if code is None or depth > 4 or not _in_jax(code.co_filename):
        return False
    if code.co_name != "reraise_with_filtered_traceback":
        return True
    for cell in getattr(function, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        if callable(inner) and _jax_transform_function(inner, depth + 1):
            return True
    return False


def check_root(model: Any, leaves: List[Any]) -> None:
    """Refuses transformed roots (``jax.jit``, ``jax.vmap``, ``jax.grad``, Equinox filter
    transforms) and captures started from inside a transform (tracer inputs)."""
    transformed = (
        _is_transform(model)
        or (hasattr(model, "lower") and hasattr(model, "trace"))
        or _jax_transform_function(model)
    )
    if transformed:
        raise refuse(
            f"the root callable {getattr(model, '__name__', type(model).__name__)} is a jax transform "
            "(jit, vmap or grad)",
            "transformed_root_callable",
            "trace the plain function; apply jax.jit/vmap/grad outside tl.trace",
        )
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        raise refuse(
            "tl.trace was called from inside a jax transform (its inputs are tracers)",
            "transformed_root_callable",
            "call tl.trace outside jax.jit / jax.vmap / jax.grad",
        )


class Root:
    """The traced call split into parameter leaves and input leaves.

    ``flat(*dynamic)`` rebuilds the call from the dynamic leaves (parameters first, then
    inputs) and runs it; ``params`` and ``inputs`` list ``(name, value)`` for them."""

    def __init__(
        self,
        kind: str,
        params_tree: Any,
        inputs: tuple,
        kwargs: dict,
        call: Callable[[Any, tuple, dict], Any],
        input_names: List[str],
    ) -> None:
        self.kind = kind
        self.call = call
        self.class_name: Optional[str] = None
        self.framework: Optional[str] = None
        #: Module roots only: the module records, each parameter's owner and trainability,
        #: and the scope tracker class.
        self.modules: Optional[list] = None
        self.param_module: Callable[[str], int] = lambda name: 0
        self.param_trainable: Callable[[str], bool] = lambda name: True
        self.declare_modules: Optional[Callable[[Any], None]] = None
        self.scopes: Any = None
        #: What the traced jaxpr depends on besides the leaves (see :mod:`.jaxpr_cache`): objects
        #: by identity (None: do not reuse a trace of this root) and a hashable structure.
        self.anchors: Optional[tuple] = None
        self.structure: Any = None
        with_path, self.treedef = jax.tree_util.tree_flatten_with_path((params_tree, inputs, kwargs))
        self.leaves = [leaf for _, leaf in with_path]
        self.dynamic_index = [index for index, leaf in enumerate(self.leaves) if is_dynamic(leaf)]
        self.params: List[Tuple[str, Any]] = []
        self.inputs: List[Tuple[str, Any]] = []
        #: The positional argument each input leaf came from (None for keyword inputs).
        self.input_positions: List[Optional[int]] = []
        self.input_names = input_names
        for index in self.dynamic_index:
            path, leaf = with_path[index]
            group = path[0].idx
            if group == 0:
                self.params.append((path_name(path[1:]), leaf))
            elif group == 1:
                position = path[1].idx
                self.inputs.append((input_names[position] + _suffix(path[2:]), leaf))
                self.input_positions.append(position)
            else:
                self.inputs.append((key_name(path[1]) + _suffix(path[2:]), leaf))
                self.input_positions.append(None)

    @property
    def dynamic(self) -> List[Any]:
        return [self.leaves[index] for index in self.dynamic_index]

    def rebuild(self, dynamic: List[Any]) -> Tuple[Any, tuple, dict]:
        leaves = list(self.leaves)
        for index, value in zip(self.dynamic_index, dynamic):
            leaves[index] = value
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def flat(self, *dynamic: Any) -> Any:
        params, inputs, kwargs = self.rebuild(list(dynamic))
        return _array_outputs(self.call(params, inputs, kwargs))


def _array_outputs(output: Any) -> Any:
    """The model's output when every leaf is an array or a number; else the typed refusal (JAX
    would say only that ``flat`` in this file returned an invalid JAX type)."""
    for leaf in jax.tree_util.tree_leaves(output):
        if not isinstance(leaf, (jax.Array, jax.core.Tracer, np.ndarray, np.generic, int, float, complex)):
            raise ArgumentError(
                f"the model returned a {type(leaf).__name__} ({short_repr(leaf)}) among its outputs; "
                "TorchLens records arrays",
                "model_output_unsupported",
                "return arrays (or a tuple, list or dict of arrays) from the traced function, and "
                "keep other results out of it",
            )
    return output


def _suffix(path: tuple) -> str:
    return "".join("." + key_name(entry) for entry in path)


def raw_root(model: Any, args: tuple, kwargs: dict) -> Root:
    """``fn(params, *inputs)``: with two or more positional arguments the first is the
    parameter pytree; with one, it is the only input and there are no parameters."""
    if len(args) >= 2:
        params, inputs = args[0], tuple(args[1:])
        names = argument_names(model, len(inputs), 1)
        root = Root("function_root", params, inputs, kwargs, lambda p, i, k: model(p, *i, **k), names)
    else:
        names = argument_names(model, len(args), 0)
        root = Root("function_root", None, tuple(args), kwargs, lambda p, i, k: model(*i, **k), names)
    root.class_name = getattr(model, "__name__", None) or type(model).__name__
    root.anchors = function_anchors(model)
    return root
