"""One capture of an MLX forward: wrap the ``mlx.core`` functions (``mx.fast`` and ``mx.linalg``
too), the ``mx.array`` methods, operators and the ``T``/``mT`` properties, and the activation
functions of ``mlx.nn`` for the owner thread; record each call as one op while the lazy graph
is built; realize every recorded value in one ``mx.eval`` after the forward returns.

Identity: MLX arrays are Python objects, so a value is known by ``id`` while the recorder keeps
the object alive. An argument no wrapper produced is a constant (read from outside the forward)
unless it was built inside the forward by ``mx.array(...)``, which no op produced: that
ceilings the capture (``unwrapped_op_in_capture``). In-place operators and ``a[i] = v`` give the
object a new value: the old value is kept as a copy and the object is known by the new one.

Live edits (``intervene=``) and ``stop_after=`` run at the wrapper boundary: the wrapper holds
each concrete (lazy) output before the caller sees it."""

from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import mlx.core as mx
import mlx.nn as nn
import mlx.nn.layers
import mlx.nn.layers.activations as activations

from torchlens.adapter_kit.replay import ParamRef, ReplayRecord, ValueRef, argument_template

from . import refusals
from .dtypes import neutral_name

#: ``mlx.core`` callables that are not array operations (or are refused transforms).
NOT_OPS = frozenset(
    {
        "eval",
        "async_eval",
        "compile",
        "grad",
        "value_and_grad",
        "vmap",
        "jvp",
        "vjp",
        "checkpoint",
        "custom_function",
        "disable_compile",
        "enable_compile",
        "load",
        "save",
        "save_gguf",
        "save_safetensors",
        "savez",
        "savez_compressed",
        "synchronize",
        "finfo",
        "iinfo",
        "issubdtype",
        "isdtype",
        "broadcast_shapes",
        "result_type",
        "can_cast",
        "array",
        "asarray",
        "default_device",
        "default_stream",
        "stream",
        "new_stream",
        "new_thread_local_stream",
        "new_thread_unsafe_stream",
        "device_count",
        "device_info",
        "is_available",
        "export_function",
        "export_to_dot",
        "exporter",
        "import_function",
        "printoptions",
        "depends",
        "einsum_path",
    }
)

#: ``mx.array`` methods that read values out or are not array operations.
NOT_METHODS = frozenset(
    {
        "item",
        "tolist",
        "at",
        "__bool__",
        "__float__",
        "__int__",
        "__index__",
        "__complex__",
        "__bytes__",
        "__array__",
        "__array_namespace__",
        "__dlpack__",
        "__dlpack_device__",
        "__repr__",
        "__str__",
        "__format__",
        "__hash__",
        "__len__",
        "__iter__",
        "__getstate__",
        "__setstate__",
        "__reduce__",
        "__reduce_ex__",
        "__copy__",
        "__deepcopy__",
        "__init__",
        "__new__",
        "__sizeof__",
        "__getattribute__",
        "__setattr__",
        "__delattr__",
        "__dir__",
        "__init_subclass__",
        "__subclasshook__",
        "__class__",
        "__eq__",
        "__ne__",
    }
)

#: Comparisons recorded under their op name (kept off NOT_METHODS's hash-related pair above:
#: ``__eq__``/``__ne__`` are wrapped explicitly).
COMPARISONS = {"__eq__": "eq", "__ne__": "ne"}

#: ``mlx.nn`` activation functions recorded as one op under their own name (MLX compiles most
#: of them, so their bodies run where no wrapper sees them).
NN_ACTIVATIONS = (
    "relu",
    "relu6",
    "leaky_relu",
    "gelu",
    "gelu_approx",
    "gelu_fast_approx",
    "silu",
    "sigmoid",
    "softplus",
    "softsign",
    "mish",
    "elu",
    "selu",
    "celu",
    "log_sigmoid",
    "log_softmax",
    "softmax",
    "tanh",
    "hardswish",
    "hard_tanh",
    "glu",
    "prelu",
    "step",
    "softmin",
)


def method_func_name(name: str) -> str:
    """The op name of an array method: ``__add__``/``__radd__``/``__iadd__`` log ``add``,
    ``__getitem__`` logs ``getitem``, ``__setitem__`` logs ``setitem``."""
    if name in COMPARISONS:
        return COMPARISONS[name]
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core in ("getitem", "setitem"):
            return core
        if core.startswith("r") and core[1:] in _BINARY:
            return core[1:]
        if core.startswith("i") and core[1:] in _BINARY:
            return core[1:]
        return core
    return name


_BINARY = frozenset(
    {
        "add",
        "sub",
        "mul",
        "truediv",
        "div",
        "floordiv",
        "mod",
        "pow",
        "matmul",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
    }
)


def shape_of(value: Any) -> Tuple[int, ...]:
    return tuple(int(extent) for extent in value.shape)


class Stop(Exception):
    """Raised by a wrapper when ``stop_after=`` matched: nothing past the frontier runs."""

    def __init__(self, frontier: List[int]) -> None:
        super().__init__("stop_after matched")
        self.frontier = frontier


class Recorder:
    """The capture's state: value ids by array object, the values kept, the replay records."""

    def __init__(self, session: Any, on_unwrapped: str = "warn", logging: bool = True) -> None:
        self.session = session
        self.on_unwrapped = on_unwrapped
        #: id(array) → value id (inputs, parameters, constants, ops).
        self.known: Dict[int, int] = {}
        #: Value id → the array (kept alive, so ids are not reused during the capture).
        self.values: Dict[int, Any] = {}
        self.records: Dict[int, ReplayRecord] = {}
        self.params: Dict[int, Any] = {}
        self.param_dtypes: Dict[int, str] = {}
        #: ids of arrays that existed before the forward and that it can read (globals and
        #: closures of the forward's code, attributes of the modules): constants when read.
        self.outside: Set[int] = set()
        #: id(array) → a parameter not declared yet (``defer_params``).
        self.pending: Dict[int, Tuple[str, int, Any, bool]] = {}
        #: Above zero inside a wrapped call (its inner calls are not recorded).
        self.quiet = 0
        self.unwrapped: List[str] = []
        #: Live edits: called with ``(func, outputs ids, result)``; returns the result to hand on.
        self.on_op: Optional[Callable[[str, List[int], Any], Any]] = None
        #: Value id → the edit applied to it ``(rule description, action description, action)``.
        self.edits: Dict[int, List[Tuple[str, str, Any]]] = {}
        #: Value id → its value before the first edit (what replay checks the producer against).
        self.pre_values: Dict[int, Any] = {}
        self.logging = logging
        #: Gradient taps (derived intermediate gradients): called per op output, returns the value.
        self.tap: Optional[Callable[[int, Any], Any]] = None
        #: id of each wrapped original → where its wrapper is installed (this capture's).
        self.wrapped: Dict[int, Tuple[Any, str]] = {}
        #: Whether the forward called a transformed (compiled, grad, vmap) function.
        self.transformed_called = False
        #: ``(module, name)`` of transformed functions the forward reads as globals.
        self.global_transforms: List[Tuple[Any, str]] = []
        #: Structural signature of every recorded value, in order: ``(kind, func, shape, dtype,
        #: parents)`` with parents named by their position in this list (derived gradients match
        #: a replay against the capture with it).
        self.order: List[Tuple[str, str, Tuple[int, ...], str, Tuple[int, ...]]] = []
        #: Value id → its position in ``order``.
        self.position: Dict[int, int] = {}
        #: Value ids in ``order``'s order.
        self.order_ids: List[int] = []

    def _note(self, value_id: int, kind: str, func: str, array: Any, parents: Sequence[int]) -> None:
        position = self.position
        self.position[value_id] = len(self.order)
        self.order_ids.append(value_id)
        self.order.append(
            (
                kind,
                func,
                shape_of(array),
                neutral_name(array.dtype),
                tuple(position.get(parent, -1) for parent in parents),
            )
        )

    # ---- leaves ----------------------------------------------------------------------------

    def param(self, address: str, module_id: int, array: Any, trainable: bool) -> int:
        known = self.known.get(id(array))
        if known is not None:
            return known
        value_id = self.session.new_value_id()
        dtype = neutral_name(array.dtype)
        self.session.param(value_id, address, module_id, shape_of(array), dtype, trainable)
        self.known[id(array)] = value_id
        self.params[value_id] = array
        self.param_dtypes[value_id] = dtype
        self._note(value_id, "param", address, array, ())
        return value_id

    def defer_params(self, params: Sequence[Tuple[str, int, Any, bool]]) -> None:
        """Parameters ``(address, module id, array, trainable)`` declared when an op first reads
        them, so a stopped trace accounts only for the parameters its captured ops used; the
        rest are declared by ``declare_remaining`` after a complete forward."""
        for address, owner, array, trainable in params:
            self.pending.setdefault(id(array), (address, owner, array, trainable))

    def declare_remaining(self) -> None:
        """Declares the parameters no op read (a complete forward lists every parameter)."""
        for address, owner, array, trainable in list(self.pending.values()):
            self.param(address, owner, array, trainable)
        self.pending.clear()

    def input(self, name: str, array: Any) -> int:
        value_id = self.known.get(id(array))
        if value_id is not None and value_id in self.values:
            return value_id
        value_id = self.session.new_value_id()
        self.values[value_id] = array
        self.session.input(name, value_id, array, shape_of(array), neutral_name(array.dtype))
        self.known[id(array)] = value_id
        self._note(value_id, "input", name, array, ())
        return value_id

    def constant(self, array: Any) -> int:
        value_id = self.session.new_value_id()
        self.values[value_id] = array
        self.known[id(array)] = value_id
        self.session.constant(value_id, array, shape_of(array), neutral_name(array.dtype))
        self._note(value_id, "constant", "constant", array, ())
        return value_id

    def _unknown(self, array: Any) -> int:
        """The value id of an argument no wrapper produced."""
        pending = self.pending.pop(id(array), None)
        if pending is not None:
            return self.param(*pending)
        if id(array) not in self.outside:
            what = "an array built inside the forward by an unwrapped call, e.g. mx.array(...)"
            if self.on_unwrapped == "refuse":
                raise refusals.unwrapped(what)
            self.unwrapped.append(what)
            return self._record_op("array", [], (), {}, array, call=None, opaque=True)[0]
        return self.constant(array)

    def reference(self, array: Any) -> Tuple[int, ValueRef]:
        value_id = self.known.get(id(array))
        if value_id is None:
            value_id = self._unknown(array)
        return value_id, ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    # ---- ops --------------------------------------------------------------------------------

    def _record_op(
        self,
        func: str,
        parents: List[Tuple[int, int]],
        args: tuple,
        kwargs: dict,
        result: Any,
        call: Optional[Callable[..., Any]],
        opaque: bool = False,
    ) -> List[int]:
        arrays = result_arrays(result)
        outputs = []
        ids = []
        many = not isinstance(result, mx.array)
        for index, array in enumerate(arrays):
            value_id = self.session.new_value_id()
            self.known[id(array)] = value_id
            self.values[value_id] = array
            self.records[value_id] = ReplayRecord(
                call=call,
                func_name=func,
                args=args,
                kwargs=kwargs,
                output_index=index if many else None,
                opaque=opaque,
            )
            outputs.append((value_id, array, shape_of(array), neutral_name(array.dtype)))
            ids.append(value_id)
            self._note(value_id, "op", func, array, [parent for parent, _ in parents])
        self.session.op(func, parents, outputs)
        return ids

    def record(self, func: str, call: Callable[..., Any], args: tuple, kwargs: dict, result: Any) -> Any:
        """Records one wrapped call's result as an op; returns what the caller gets (an edited
        value when an ``intervene=`` rule matched)."""
        if not result_arrays(result):
            return result
        parents, args_template, kwargs_template = argument_template(args, kwargs, mx.array, self.reference)
        ids = self._record_op(func, parents, args_template, kwargs_template, result, call)
        if self.tap is not None:
            result = self._tapped(ids, result)
        if self.on_op is not None:
            result = self.on_op(func, ids, result)
        return result

    def _tapped(self, ids: List[int], result: Any) -> Any:
        arrays = []
        for value_id, array in zip(ids, result_arrays(result)):
            self.quiet += 1  # the tap itself is not an op
            try:
                tapped = self.tap(value_id, array)
            finally:
                self.quiet -= 1
            if tapped is not array:
                self.known[id(tapped)] = value_id
                self.values.setdefault(-value_id, tapped)  # keep it alive: ids stay unique
            arrays.append(tapped)
        return rebuild(result, arrays)

    def in_place(self, func: str, call: Callable[..., Any], target: Any, args: tuple, kwargs: dict) -> Any:
        """An in-place operator or ``a[i] = v``: the object gets a new value. The old value is
        kept as a copy so its payload stays what it was; the op's parents are read before."""
        old_id = self.known.get(id(target))
        if old_id is not None:
            self.session.retire(old_id)
            snapshot = mx.array(target)
            self.values[old_id] = snapshot
            self.session.replace_payload(old_id, snapshot)
            self.known[id(snapshot)] = old_id
            self.known.pop(id(target), None)
            target_ref: Any = snapshot
        else:
            target_ref = target
        replay_args = (target_ref,) + tuple(args[1:])
        parents, args_template, kwargs_template = argument_template(
            replay_args, kwargs, mx.array, self.reference
        )
        result = call(*args, **kwargs)
        produced = target if result is None else result
        if func == "setitem":
            replay = _functional_setitem
        else:
            replay = call
        self._record_op(func, parents, args_template, kwargs_template, produced, replay)
        return result

    def value_id_of(self, array: Any) -> Optional[int]:
        """The value id of an array the forward returned."""
        value_id = self.known.get(id(array))
        if value_id is None:
            value_id = self._unknown(array)
        return value_id

    # ---- realize-once -------------------------------------------------------------------------

    def realize_all(self, evaluate: Callable[..., Any]) -> None:
        """Evaluates every recorded value (and every parameter) in one ``mx.eval``. A value that
        cannot be evaluated was recorded inside a transform (a tracer): that refuses."""
        arrays = list(self.values.values()) + list(self.params.values()) + list(self.pre_values.values())
        if arrays:
            try:
                evaluate(*arrays)
            except RuntimeError as error:
                raise refusals.refuse(
                    "a transformed function (mx.compile, mx.grad, mx.vmap) ran inside the forward "
                    f"where no wrapper could route it, so tracers were recorded ({str(error)[:80]})",
                    "mlx_transform_at_entry",
                    "call the transformed function from a module attribute or a module global, or "
                    "move the transform outside the traced call",
                ) from None

    # ---- hooks -----------------------------------------------------------------------------

    def install(self, patches: Any) -> None:
        """Wraps MLX for the owner thread until the capture ends."""
        self.patches_owner = patches.is_owner_thread
        wrapped = self.wrapped
        for owner, name, kind, func in inventory():
            if kind == "function":
                _wrap(patches, owner, name, self._function(func), wrapped)
            elif kind == "in_place":
                _wrap(patches, owner, name, self._in_place(func), wrapped)
            else:
                patches.replace(owner, name, self._property(func, vars(owner)[name]))
        # Iterating an array (``for row in x``) yields its rows as getitem ops.
        _wrap(patches, mx.array, "__iter__", _iterating, wrapped)
        # Activation modules (nn.ReLU) call the compiled function they were made from: route
        # their calls through the wrapped function of the same name.

        for klass, name in _activation_classes():
            patches.replace(klass, "__call__", _calling(activations, name))
        # Compiled functions run their Python body (so the wrappers see every operation).
        mx.disable_compile()
        patches.on_exit(_enable_compile)
        # Any other transformed function (mx.compile, mx.grad, mx.vmap, ...) called by the forward
        # runs as one op: its body runs under the transform, where recorded arrays would be
        # tracers. The capture is ceilinged (mlx_compiled_attribute_not_logged).
        transformed = refusals.gc_func_type()
        original_call = transformed.__call__
        owner_thread = patches.owner_thread

        def call_transformed(function: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.quiet or threading.get_ident() != owner_thread:
                return original_call(function, *args, **kwargs)
            recorder.transformed_called = True
            recorder.quiet += 1
            try:
                result = original_call(function, *args, **kwargs)
            finally:
                recorder.quiet -= 1
            return recorder.record("transformed", _bound(original_call, function), args, kwargs, result)

        recorder = self
        patches.replace(transformed, "__call__", call_transformed)
        random = mx.random
        for name in dir(random):
            if not name.startswith("_") and name not in ("seed", "key", "split", "state"):
                if callable(getattr(random, name)):
                    _wrap(patches, random, name, self._rng(name), wrapped)

    def _function(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if recorder.quiet:
                    return original(*args, **kwargs)
                recorder.quiet += 1
                try:
                    result = original(*args, **kwargs)
                finally:
                    recorder.quiet -= 1
                return recorder.record(name, original, args, kwargs, result)

            return wrapper

        return make

    def _in_place(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(target: Any, *args: Any, **kwargs: Any) -> Any:
                if recorder.quiet:
                    return original(target, *args, **kwargs)
                recorder.quiet += 1
                try:
                    return recorder.in_place(name, original, target, (target,) + args, kwargs)
                finally:
                    recorder.quiet -= 1

            return wrapper

        return make

    def _property(self, name: str, prop: property) -> property:
        recorder = self
        getter = prop.fget

        def fget(array: Any) -> Any:
            if recorder.quiet or not recorder.patches_owner():
                return getter(array)
            recorder.quiet += 1
            try:
                result = getter(array)
            finally:
                recorder.quiet -= 1
            return recorder.record(name, getter, (array,), {}, result)

        return property(fget, prop.fset, prop.fdel, prop.__doc__)

    def scan_outside(self, objects: Sequence[Any]) -> None:
        """Remembers the arrays the forward can read from outside: in the globals, closures and
        defaults of each object's code (functions, module ``__call__`` methods), in instance
        attributes, one container level deep."""
        seen: Set[int] = set()
        for obj in objects:
            function = obj if callable(obj) and hasattr(obj, "__code__") else None
            if function is None:
                function = type(obj).__call__ if callable(obj) else None
                self._collect(_attributes(obj))
                for klass in type(obj).__mro__:
                    if klass.__module__.split(".", 1)[0] not in ("mlx", "builtins"):
                        self._collect(dict(vars(klass)))  # class-level arrays (self.SCALE)
            function = getattr(function, "__func__", function)
            if function is None or id(function) in seen:
                continue
            seen.add(id(function))
            code = getattr(function, "__code__", None)
            namespace = getattr(function, "__globals__", {}) or {}
            if code is not None:
                read = {name: namespace[name] for name in _names(code) if name in namespace}
                self._collect(read)
                self._global_transforms(function, namespace, read)
            for cell in getattr(function, "__closure__", None) or ():
                try:
                    self._collect({"": cell.cell_contents})
                except ValueError:
                    continue
            self._collect({"": getattr(function, "__defaults__", None) or ()})

    def _global_transforms(self, function: Any, namespace: Dict[str, Any], read: Dict[str, Any]) -> None:
        """Transformed functions (``mx.compile``/``grad``/``vmap`` results) the forward's code
        reads as module globals: ``(module, name)`` for the capture to route through one op."""
        transformed = refusals.gc_func_type()
        module = sys.modules.get(getattr(function, "__module__", None) or "")
        if module is None or vars(module) is not namespace:
            return
        for name, value in read.items():
            if isinstance(value, transformed):
                self.global_transforms.append((module, name))

    def _collect(self, values: Dict[str, Any]) -> None:
        for value in values.values():
            items = (
                value.values()
                if isinstance(value, dict)
                else value
                if isinstance(value, (list, tuple))
                else (value,)
            )
            for item in items:
                if isinstance(item, mx.array):
                    self.outside.add(id(item))

    def _rng(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise refusals.rng(name)

            return refuse

        return make

    #: Whether the calling thread is the capture's (set by ``install``; properties are replaced
    #: on the class, so their getter checks the thread itself).
    patches_owner: Callable[[], bool] = staticmethod(lambda: True)


def rebind_held_functions(patches: Any, objects: Sequence[Any], wrapped: Dict[int, Tuple[Any, str]]) -> None:
    """Functions held as instance attributes (``nn.MaxPool2d`` keeps ``mx.max``) were read
    before the wrappers were installed: point them at the wrappers for the capture
    (``wrapped``: id of each original → where its wrapper is installed)."""
    for obj in objects:
        try:
            attributes = vars(obj)
        except TypeError:
            continue
        for name, value in list(attributes.items()):
            found = wrapped.get(id(value))
            if found is not None:
                owner, attribute = found
                patches.replace(obj, name, getattr(owner, attribute))


def _wrap(
    patches: Any,
    owner: Any,
    name: str,
    make: Callable[[Callable[..., Any]], Callable[..., Any]],
    wrapped: Dict[int, Tuple[Any, str]],
) -> None:
    """``patches.wrap`` for callables ``functools.wraps`` cannot copy (MLX 0.26's compiled
    functions have no string ``__qualname__``): the wrapper on the owner thread, the original
    on every other thread, restored when the capture ends."""
    original = getattr(owner, name)
    wrapper = make(original)
    wrapped[id(original)] = (owner, name)
    owner_thread = patches.owner_thread
    get_ident = threading.get_ident

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if get_ident() == owner_thread:
            return wrapper(*args, **kwargs)
        return original(*args, **kwargs)

    dispatch.__name__ = name
    dispatch.__wrapped__ = original  # type: ignore[attr-defined]
    patches.replace(owner, name, dispatch)


#: ``mx.array`` properties that compute an array (the others read metadata: ``shape``, ``dtype``).
ARRAY_PROPERTIES = ("T", "mT", "real", "imag")


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
            value = getattr(value, "__wrapped__", value)
            if type(value).__name__ == "nb_func":
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
        func = method_func_name(name)
        if name == "__setitem__" or (name.startswith("__i") and name[3:-2] in _BINARY):
            found.append((mx.array, name, "in_place", func))
        else:
            found.append((mx.array, name, "function", func))

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


def _names(code: Any) -> Set[str]:
    """Global names a code object (and the code nested in it) reads."""
    found = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            found |= _names(const)
    return found


def _attributes(obj: Any) -> Dict[str, Any]:
    try:
        return dict(vars(obj))
    except TypeError:
        return {}


def _iterating(original: Callable[..., Any]) -> Callable[..., Any]:
    def iterate(array: Any) -> Any:
        if not array.shape:
            return original(array)  # a 0-d array raises as MLX does
        getitem = mx.array.__getitem__  # the wrapped one while the capture runs
        return (getitem(array, index) for index in range(array.shape[0]))

    return iterate


def _bound(call: Callable[..., Any], function: Any) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        return call(function, *args, **kwargs)

    return run


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


def result_arrays(result: Any) -> List[Any]:
    """The arrays of a call's result (one array, or a list/tuple of arrays)."""
    if isinstance(result, mx.array):
        return [result]
    if isinstance(result, (list, tuple)) and result and all(isinstance(item, mx.array) for item in result):
        return list(result)
    return []


def rebuild(result: Any, arrays: Sequence[Any]) -> Any:
    """``result`` with its arrays replaced by ``arrays`` (same structure)."""
    if isinstance(result, mx.array):
        return arrays[0]
    return type(result)(arrays) if isinstance(result, tuple) else list(arrays)
