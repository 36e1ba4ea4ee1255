"""One capture of an MLX forward on the kit's recorder: wrap the ``mlx.core`` functions
(``mx.fast`` and ``mx.linalg`` too), the ``mx.array`` methods, operators and the ``T``/``mT``
properties, and the activation functions of ``mlx.nn`` for the owner thread; record each call
as one op while the lazy graph is built; realize every recorded value in one ``mx.eval`` after
the forward returns.

Identity is the kit's (by object, held for the capture). An argument no wrapper produced is a
parameter (deferred: declared when an op first reads it), a constant (read from outside the
forward) or, when the forward built it with an unwrapped call such as ``mx.array(...)``, a
parentless op that ceilings the capture (``unwrapped_op_in_capture``). In-place operators and
``a[i] = v`` give the object a new value: the old value is kept as a copy, the object is known
by the new one."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import mlx.core as mx
import mlx.nn as nn
import mlx.nn.layers
import mlx.nn.layers.activations as activations

from torchlens.adapter_kit.outside_reads import code_reads
from torchlens.adapter_kit.recorder import Recorder as KitRecorder
from torchlens.adapter_kit.structures import shallow_items
from torchlens.adapter_kit.wrappers import Patches

from . import refusals
from .dtypes import neutral_name

#: ``mlx.core`` callables that are not array operations (or are refused transforms).
NOT_OPS = frozenset(
    "eval async_eval compile grad value_and_grad vmap jvp vjp checkpoint custom_function "
    "disable_compile enable_compile load save save_gguf save_safetensors savez savez_compressed "
    "synchronize finfo iinfo issubdtype isdtype broadcast_shapes result_type can_cast array "
    "asarray default_device default_stream stream new_stream new_thread_local_stream "
    "new_thread_unsafe_stream device_count device_info is_available export_function "
    "export_to_dot exporter import_function printoptions depends einsum_path".split()
)

#: ``mx.array`` methods that read values out or are not array operations (``__eq__`` and
#: ``__ne__`` are wrapped all the same, as :data:`COMPARISONS`).
NOT_METHODS = frozenset(
    "item tolist at __bool__ __float__ __int__ __index__ __complex__ __bytes__ __array__ "
    "__array_namespace__ __dlpack__ __dlpack_device__ __repr__ __str__ __format__ __hash__ "
    "__len__ __iter__ __getstate__ __setstate__ __reduce__ __reduce_ex__ __copy__ __deepcopy__ "
    "__init__ __new__ __sizeof__ __getattribute__ __setattr__ __delattr__ __dir__ "
    "__init_subclass__ __subclasshook__ __class__ __eq__ __ne__".split()
)

#: Comparisons recorded under their op name.
COMPARISONS = {"__eq__": "eq", "__ne__": "ne"}

#: ``mlx.nn`` activation functions recorded as one op under their own name (MLX compiles most
#: of them, so their bodies run where no wrapper sees them).
NN_ACTIVATIONS = (
    "relu relu6 leaky_relu gelu gelu_approx gelu_fast_approx silu sigmoid softplus softsign mish "
    "elu selu celu log_sigmoid log_softmax softmax tanh hardswish hard_tanh glu prelu step "
    "softmin".split()
)

_BINARY = frozenset("add sub mul truediv div floordiv mod pow matmul and or xor lshift rshift".split())

#: ``mx.array`` properties that compute an array (the others read metadata: ``shape``, ``dtype``).
ARRAY_PROPERTIES = ("T", "mT", "real", "imag")

#: The ceiling of a call into a transformed function (``mx.compile``, ``grad``, ``vmap``): its
#: body runs under the transform, where recorded arrays would be tracers, so it is one op.
TRANSFORMED = "mlx_compiled_attribute_not_logged"

#: ``mx.random`` functions that do not draw (the others refuse: replay would draw again).
_NOT_DRAWS = ("seed", "key", "split", "state")


def method_func_name(name: str) -> str:
    """The op name of an array method: ``__add__``/``__radd__``/``__iadd__`` log ``add``,
    ``__getitem__`` logs ``getitem``, ``__setitem__`` logs ``setitem``."""
    if name in COMPARISONS:
        return COMPARISONS[name]
    if not (name.startswith("__") and name.endswith("__")):
        return name
    core = name[2:-2]
    return core[1:] if core[:1] in ("r", "i") and core[1:] in _BINARY else core


class Recorder(KitRecorder):
    """The kit's recorder over ``mx.array``, with MLX's op interception, deferred parameters,
    its outside arrays and the structural signature derived gradients replay against."""

    array_type = mx.array

    def __init__(self, session: Any, on_unwrapped: str = "warn") -> None:
        super().__init__(session)
        self.on_unwrapped = on_unwrapped
        #: ids of arrays that existed before the forward and that it can read (globals and
        #: closures of the forward's code, attributes of the modules): constants when read.
        self.outside: Set[int] = set()
        self.trainable: Dict[int, bool] = {}
        #: ``(module or object, name)`` of transformed functions the forward reads as module
        #: globals or instance attributes.
        self.transforms: List[Tuple[Any, str]] = []
        #: Gradient taps (derived intermediate gradients): ``(value id, array)`` → the array
        #: that flows on, for every op output.
        self.tap: Optional[Callable[[int, Any], Any]] = None
        #: ``id`` of each wrapped original → where its wrapper is installed (this capture's).
        self.wrapped: Dict[int, Tuple[Any, str]] = {}
        #: Structural signature of every recorded value, in order: ``(kind, func, shape, dtype,
        #: parents)`` with parents named by their position in this list (derived gradients match
        #: a replay against the capture with it), its value ids and each id's position.
        self.order: List[Tuple[str, str, Tuple[int, ...], str, Tuple[int, ...]]] = []
        self.order_ids: List[int] = []
        self.position: Dict[int, int] = {}

    # ---- MLX's facts ------------------------------------------------------------------------------

    def dtype_of(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def is_trainable(self, param: Any) -> bool:
        return self.trainable.get(id(param), True)

    def copy(self, value: Any) -> Any:
        return mx.array(value)

    # ---- values the capture declares ------------------------------------------------------------

    def declared(self, kind: str, name: str, value_id: int, value: Any, parents: Iterable[int] = ()) -> None:
        """Appends each declared value to the structural signature."""
        self.position[value_id] = len(self.order)
        self.order_ids.append(value_id)
        parent_positions = tuple(self.position.get(parent, -1) for parent in parents)
        self.order.append((kind, name, self.shape_of(value), self.dtype_of(value), parent_positions))

    def defer_params(self, params: Iterable[Tuple[str, int, Any, bool]]) -> None:
        """Parameters ``(address, module id, array, trainable)``, each declared when an op first
        reads it (the kit's :meth:`defer`)."""
        for address, owner, array, trainable in params:
            self.defer(address, owner, array)
            self.trainable[id(array)] = trainable

    def declare_outside(self, value: Any) -> int:
        if id(value) not in self.outside:
            what = "an array built inside the forward by an unwrapped call, e.g. mx.array(...)"
            if self.on_unwrapped == "refuse":
                raise refusals.unwrapped(what)
            self.ceilings["unwrapped_op_in_capture"] = None
            return self.report_op("array", None, [], (), {}, [(None, value)], opaque=True)[0][0]
        return super().declare_outside(value)

    def _tapped(self, func: str, value_id: int, array: Any) -> Any:
        with self.quiet():  # the tap itself is not an op
            tapped = self.tap(value_id, array)  # type: ignore[misc]
        if tapped is not array:
            self.retag(value_id, tapped)
        return tapped

    # ---- interception ----------------------------------------------------------------------------

    def install(self, patches: Patches) -> None:
        """Wraps MLX for the owner thread until the capture ends."""
        self.wrapped = patches.wrapped
        if self.tap is not None:
            self.on_output = self._tapped
        for owner, name, kind, func in inventory():
            if kind == "in_place":
                replay = _functional_setitem if func == "setitem" else None
                patches.wrap(owner, name, self.in_place_wrapper(func, replay))
            else:  # a function, a method or a computed property (its getter)
                patches.wrap(owner, name, self.op_wrapper(func))
        # Iterating an array (``for row in x``) yields its rows as getitem ops.
        patches.wrap(mx.array, "__iter__", _iterating)
        # Activation modules (nn.ReLU) call the compiled function they were made from: route
        # their calls through the wrapped function of the same name.
        for klass, name in _activation_classes():
            patches.replace(klass, "__call__", _calling(activations, name))
        # Compiled functions run their Python body (so the wrappers see every operation).
        mx.disable_compile()
        patches.on_exit(_enable_compile)
        # Any other transformed function called by the forward runs as one op.
        patches.wrap(refusals.gc_func_type(), "__call__", self.op_wrapper("transformed", TRANSFORMED))
        for name in dir(mx.random):
            if not name.startswith("_") and name not in _NOT_DRAWS and callable(getattr(mx.random, name)):
                patches.wrap(mx.random, name, self.refusing_wrapper(functools.partial(refusals.rng, name)))

    def scan_outside(self, objects: Sequence[Any]) -> None:
        """Remembers what the forward can read from outside (the kit's ``code_reads``): arrays,
        one container level deep (constants when read), and transformed functions held as
        module globals or instance attributes (each called as one op)."""
        transformed = refusals.gc_func_type()
        for owner, name, value in code_reads(objects, "mlx"):
            self.outside.update(id(item) for item in shallow_items(value) if isinstance(item, mx.array))
            if owner is not None and isinstance(value, transformed):
                self.transforms.append((owner, name))


@functools.cache
def inventory() -> Tuple[Tuple[Any, str, str, str], ...]:
    """What a capture wraps, read once per process from MLX itself: ``(owner, attribute, kind,
    op name)`` with kind ``function``, ``in_place`` or ``property``. Read through
    ``__wrapped__``, so a capture installed in another thread does not hide an entry."""
    found: List[Tuple[Any, str, str, str]] = []
    owners = [mx] + [getattr(mx, sub) for sub in ("fast", "linalg") if hasattr(mx, sub)]
    for owner in owners:
        for name in dir(owner):
            if name.startswith("_") or name in NOT_OPS:
                continue
            value = getattr(owner, name)
            if type(getattr(value, "__wrapped__", value)).__name__ == "nb_func":
                found.append((owner, name, "function", name))
    for name, value in list(vars(mx.array).items()):
        if name in NOT_METHODS and name not in COMPARISONS:
            continue
        if isinstance(value, property):
            if name in ARRAY_PROPERTIES:
                found.append((mx.array, name, "property", name))
            continue
        value = getattr(value, "__wrapped__", value)
        if type(value).__name__ not in ("nb_method", "wrapper_descriptor", "method_descriptor"):
            continue
        in_place = name == "__setitem__" or (name.startswith("__i") and name[3:-2] in _BINARY)
        found.append((mx.array, name, "in_place" if in_place else "function", method_func_name(name)))
    for name, original in _activation_originals():
        found.append((activations, name, "function", name))
        for namespace in (nn, mlx.nn.layers):
            if getattr(namespace, name, None) is original:
                found.append((namespace, name, "function", name))
    return tuple(found)


@functools.cache
def _activation_originals() -> Tuple[Tuple[str, Any], ...]:
    """``(name, function)`` of the ``mlx.nn`` activation functions, as MLX defines them."""
    found = []
    for name in NN_ACTIVATIONS:
        value = getattr(activations, name, None)
        if value is not None:
            found.append((name, getattr(value, "__wrapped__", value)))
    return tuple(found)


@functools.cache
def _activation_classes() -> Tuple[Tuple[type, str], ...]:
    """``(class, function name)`` of the activation modules whose ``__call__`` calls one of the
    activation functions directly (a closure of ``_make_activation_module``)."""
    originals = {id(original): name for name, original in _activation_originals()}
    found = []
    for klass in list(vars(activations).values()):
        call = vars(klass).get("__call__") if isinstance(klass, type) else None
        for cell in getattr(call, "__closure__", None) or ():
            try:
                name = originals.get(id(cell.cell_contents))
            except ValueError:
                continue
            if name is not None:
                found.append((klass, name))
                break
    return tuple(found)


def _iterating(original: Callable[..., Any]) -> Callable[..., Any]:
    def iterate(array: Any) -> Any:
        if not array.shape:
            return original(array)  # a 0-d array raises as MLX does
        getitem = mx.array.__getitem__  # the wrapped one while the capture runs
        return (getitem(array, index) for index in range(array.shape[0]))

    return iterate


def _calling(module: Any, name: str) -> Callable[..., Any]:
    def call(layer: Any, x: Any) -> Any:
        return getattr(module, name)(x)

    return call


def _enable_compile() -> None:
    if not os.environ.get("MLX_DISABLE_COMPILE"):
        mx.enable_compile()


def _functional_setitem(target: Any, index: Any, value: Any) -> Any:
    """``a[index] = value`` without touching ``a`` (what replay runs)."""
    copy = mx.array(target)
    copy[index] = value
    return copy
