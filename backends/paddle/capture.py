"""One capture of a Paddle dygraph model. Every public kernel of ``paddle._C_ops`` (where each
Paddle Python API ends), the C++ tensor operators and ``paddle.nn.Layer.__call__`` are wrapped
for the duration of the call (owner thread only, always removed). Each wrapped call that is not
inside another wrapped call emits one independent record: its tensor arguments are its parents,
each tensor it returns is an output. Refused calls raise before they run (see ``refusals.py``).

Tensors are tagged ``(capture serial, value id)`` while the capture runs; a tensor with no tag
of this capture read by an op is a parameter, a layer buffer or a constant from outside the
forward (kept as a parentless ``constant`` op with a copied payload). An op that returns the
exact tensor object it was given is an alias of it (no new op)."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional, Tuple

import paddle

from torchlens.adapter_kit.live_edits import LiveEditHost
from torchlens.adapter_kit.module_walk import ModuleWalk
from torchlens.adapter_kit.replay import ParamRef, ReplayRecord, ValueRef, argument_template
from torchlens.adapter_kit.structures import arrays_in, substitute

from . import inventory, refusals
from .dtypes import neutral_name

#: Attribute that carries ``(capture serial, value id)`` on a tensor while a capture runs.
ID_ATTRIBUTE = "_torchlens_id"

_SERIALS = itertools.count(1)

Tensor = paddle.Tensor

#: Containers of layers (recorded as container modules, like torch's ModuleList).
_CONTAINERS = (paddle.nn.LayerList, paddle.nn.LayerDict)


class _Recordable(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return isinstance(value, Tensor) and value._is_initialized()


class Recordable(metaclass=_Recordable):
    """What counts as a tensor argument of an op: an initialized ``paddle.Tensor`` (kernels take
    empty placeholder tensors, such as an LSTM's dropout state, which hold no value)."""


#: Kernels that return internal tensors next to their result (saved statistics, reserve
#: space): only these output positions (among the returned tensors) are recorded.
PRIMARY_OUTPUTS = {
    "batch_norm": (0,),
    "sync_batch_norm": (0,),
    "layer_norm": (0,),
    "instance_norm": (0,),
    "group_norm": (0,),
    "dropout": (0,),
    "rrelu": (0,),
    "rnn": (0, 2, 3),
}


def tensors_of(value: Any) -> List[Any]:
    """Tensors of a returned structure, in order (nested tuples, lists and dicts)."""
    return arrays_in(value, Tensor)


def op_name(name: str) -> str:
    """The recorded function name of a wrapped call: the kernel name, or the operator's dunder as
    Python names it (the core folds ``__add__`` and ``__radd__`` onto ``add`` for selectors and
    labels, as it does for torch); indexing is ``__getitem__``."""
    if name == "_getitem_dygraph":
        return "__getitem__"
    return name


class Recorder(LiveEditHost):
    """State of one Paddle capture around a session (the real capture session, or a shadow one
    for the gradient pass)."""

    def __init__(self, session: Any, patches: Any) -> None:
        self.serial = next(_SERIALS)
        self.session = session
        self.patches = patches
        self.owner_thread = patches.owner_thread
        #: Nesting of wrapped calls: only the outermost call records.
        self.depth = 0
        self.module_ids: Dict[int, int] = {}
        self.buffer_addresses: Dict[int, str] = {}
        #: Value id → parameter tensor (replay reads the live parameter).
        self.params: Dict[int, Any] = {}
        self.param_dtypes: Dict[int, str] = {}
        #: Value id → every recorded value (runtime-only: replay reads these whatever save= keeps).
        self.values: Dict[int, Any] = {}
        #: Value id → how replay re-runs the op that produced it.
        self.records: Dict[int, ReplayRecord] = {}
        #: Called on every op output before the caller sees it: ``(func, value id, value) ->
        #: value`` (live edits); None when the capture edits nothing.
        self.on_output: Optional[Callable[[str, int, Any], Any]] = None
        #: Called after each module call exits: ``(module id, value ids)``.
        self.on_exit: Optional[Callable[[int, List[int]], None]] = None
        self.aliases = 0
        #: Value id → inplace version of the payload when it was held.
        self.versions: Dict[int, int] = {}
        #: Module id → its primary address.
        self.addresses: Dict[int, str] = {0: "self"}

    # ---- ids ---------------------------------------------------------------------------------

    def tag(self, tensor: Any) -> int:
        value_id = self.session.new_value_id()
        setattr(tensor, ID_ATTRIBUTE, (self.serial, value_id))
        return value_id

    def tag_lasting(self, tensor: Any) -> int:
        """Tags a tensor that outlives the capture (parameter, buffer, input, output): the tag
        comes off when the capture ends."""
        self.patches.on_exit(lambda: tensor.__dict__.pop(ID_ATTRIBUTE, None))
        return self.tag(tensor)

    def known_id(self, tensor: Any) -> Optional[int]:
        tag = getattr(tensor, ID_ATTRIBUTE, None)
        return tag[1] if tag is not None and tag[0] == self.serial else None

    def quiet(self) -> Any:
        """A block in which the wrappers pass through (copies and host reads the capture makes
        itself)."""
        recorder = self

        class _Quiet:
            def __enter__(self) -> None:
                recorder.depth += 1

            def __exit__(self, *exc: Any) -> None:
                recorder.depth -= 1

        return _Quiet()

    def id_of(self, tensor: Any) -> int:
        value_id = self.known_id(tensor)
        if value_id is not None:
            return value_id
        # Not produced inside the forward: a layer buffer, or a constant from outside.
        value_id = self.tag_lasting(tensor)
        with self.quiet():
            copy = tensor.detach().clone()
        self.values[value_id] = copy
        shape, dtype = tuple(tensor.shape), neutral_name(tensor.dtype)
        address = self.buffer_addresses.get(id(tensor))
        if address is not None:
            self.session.buffer(address, value_id, copy, shape, dtype)
        else:
            self.session.constant(value_id, copy, shape, dtype)
        return value_id

    def adopt(self, value_id: int, tensor: Any) -> None:
        """``tensor`` replaces the value ``value_id`` (a live edit): it carries the id, is the
        value replay and the payload read, and is what flows downstream."""
        setattr(tensor, ID_ATTRIBUTE, (self.serial, value_id))
        self.values[value_id] = tensor
        if value_id in self.session.payloads:
            self.versions[value_id] = tensor._inplace_version()
            self.session.replace_payload(value_id, tensor)

    def module_stack(self) -> List[str]:
        """Addresses of the module calls open now, outermost first."""
        return [
            self.addresses.get(module_id, str(module_id))
            for module_id, calls in self.session.open_calls.items()
            if calls and module_id in self.addresses and module_id != 0
        ]

    def value_facts(self, value: Any) -> Dict[str, Any]:
        scalar_bool = value.dtype == paddle.bool and int(value.size) == 1
        return {
            "shape": tuple(value.shape),
            "dtype": neutral_name(value.dtype),
            "tensor_requires_grad": not value.stop_gradient,
            "is_scalar_bool": scalar_bool,
            "bool_value": bool(value.item()) if scalar_bool else None,
        }

    def is_value(self, value: Any) -> bool:
        return isinstance(value, paddle.Tensor)

    def same_dtype(self, new: Any, like: Any) -> Any:
        return new if new.dtype == like.dtype else new.astype(like.dtype)

    def copy(self, value: Any) -> Any:
        return value.clone()

    def reference(self, tensor: Any) -> Tuple[int, ValueRef]:
        value_id = self.id_of(tensor)
        return value_id, ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    # ---- model structure ----------------------------------------------------------------------

    def declare_layers(self, model: Any) -> None:
        """Declares every layer of a root Layer (shared ones once, with all their addresses), its
        parameters and buffers. The root is module 0, ``self``."""
        walk = ModuleWalk(model, lambda layer: layer._sub_layers.items())
        walk.declare(
            self.session, lambda layer: isinstance(layer, _CONTAINERS), lambda layer: bool(layer.training)
        )
        self.module_ids.update(walk.module_ids)
        for module_id in range(len(walk.modules)):
            self.addresses[module_id] = walk.primary_address(module_id)
        for address, module_id, param in walk.owned(lambda layer: layer._parameters.items()):
            self.param(address, module_id, param)
        for address, _module_id, buffer in walk.owned(lambda layer: layer._buffers.items()):
            self.buffer_addresses[id(buffer)] = address

    def param(self, address: str, module_id: int, param: Any) -> int:
        value_id = self.tag_lasting(param)
        self.params[value_id] = param
        dtype = neutral_name(param.dtype)
        self.param_dtypes[value_id] = dtype
        self.session.param(value_id, address, module_id, tuple(param.shape), dtype, not param.stop_gradient)
        return value_id

    def input(self, name: str, tensor: Any) -> Optional[int]:
        if self.known_id(tensor) is not None:
            return self.known_id(tensor)
        value_id = self.tag_lasting(tensor)
        self.values[value_id] = tensor
        self.session.input(name, value_id, tensor, tuple(tensor.shape), neutral_name(tensor.dtype))
        return value_id

    def module_id(self, layer: Any) -> int:
        module_id = self.module_ids.get(id(layer))
        if module_id is None:
            # A layer built during the forward (or not reachable from the root): its own address.
            module_id = len(self.module_ids) if self.module_ids else 1
            while module_id in self.module_ids.values():
                module_id += 1
            self.module_ids[id(layer)] = module_id
            address = f"{type(layer).__name__.lower()}_unregistered_{module_id}"
            self.addresses[module_id] = address
            self.session.module(module_id, [address], type(layer).__name__, False, bool(layer.training))
        return module_id

    # ---- wrappers -----------------------------------------------------------------------------

    def install(self, patches: Any) -> None:
        """Wraps the kernels, the tensor methods and ``Layer.__call__`` for this capture."""
        from paddle import _C_ops

        surface = inventory.live()
        kinds: Dict[str, str] = dict.fromkeys(surface["c_ops"], "op")
        kinds.update(dict.fromkeys(surface["c_ops_in_place"], "in_place"))
        for name in surface["c_ops_rng"]:
            kinds[name] = "op_unless_test" if name in inventory.RNG_UNLESS_TEST else "rng"
        # The kernels, and the same kernels under the names Paddle's Python modules bound them
        # to at import: one dispatcher per attribute, made once per process, routing to the
        # recorder of the capture running now.
        targets = [(module, attribute, name) for module, attribute, name in inventory.rebound()]
        targets.extend((_C_ops, name, name) for name in kinds)
        for owner, attribute, name in targets:
            current = getattr(owner, attribute)
            key = (id(owner), attribute)
            cached = _DISPATCHERS.get(key)
            if cached is not None and current is cached[1]:
                continue  # a capture on this thread already installed it (nested capture)
            if cached is None or cached[0] is not current:
                cached = (current, _kernel_dispatcher(current, kinds[name], name))
                _DISPATCHERS[key] = cached
            patches.replace(owner, attribute, cached[1])
        _ACTIVE.append(self)
        patches.on_exit(lambda: _ACTIVE.remove(self))
        for name in surface["tensor_ops"]:
            patches.wrap(Tensor, name, self._op_wrapper(name))
        for name in surface["tensor_in_place"]:
            patches.wrap(Tensor, name, self._refusing(lambda name=name: refusals.in_place(f"Tensor.{name}")))
        for name in surface["tensor_escapes"]:
            patches.wrap(Tensor, name, self._refusing(lambda name=name: refusals.escape(f"Tensor.{name}")))
        for name in inventory.TENSOR_QUIET:
            patches.wrap(Tensor, name, self._quiet_wrapper)
        patches.wrap(paddle.nn.Layer, "__call__", self._layer_wrapper)

    def kernel(self, kind: str, name: str, original: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """One call of a wrapped kernel on the capturing thread."""
        if self.depth:
            return original(*args, **kwargs)
        if kind == "in_place":
            raise refusals.in_place(f"_C_ops.{name}")
        if kind == "rng":
            raise refusals.rng(name)
        if kind == "op_unless_test" and not (len(args) > 3 and args[3] is True):
            raise refusals.rng(f"{name} in training mode")
        if name == "batch_norm" and not (len(args) > 5 and args[5] is True):
            raise refusals.training_composite("batch_norm")
        self.depth += 1
        try:
            out = original(*args, **kwargs)
        finally:
            self.depth -= 1
        return self.record(op_name(name), original, args, kwargs, out)

    def _refusing(self, error: Callable[[], Exception]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def refused(*args: Any, **kwargs: Any) -> Any:
                if recorder.depth:
                    return original(*args, **kwargs)
                raise error()

            return refused

        return make

    def _quiet_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        def quiet(*args: Any, **kwargs: Any) -> Any:
            with recorder.quiet():
                return original(*args, **kwargs)

        return quiet

    def _op_wrapper(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """The wrapper of a C++ tensor method that computes a new tensor."""
        recorder = self
        func = op_name(name)

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if recorder.depth:
                    return original(*args, **kwargs)
                recorder.depth += 1
                try:
                    out = original(*args, **kwargs)
                finally:
                    recorder.depth -= 1
                return recorder.record(func, original, args, kwargs, out)

            return wrapped

        return make

    def _layer_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        def call(layer: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.depth:
                return original(layer, *args, **kwargs)
            module_id = recorder.module_id(layer)
            recorder.session.enter(module_id)
            output = original(layer, *args, **kwargs)
            return recorder.exit(module_id, output)

        return call

    def exit(self, module_id: int, output: Any) -> Any:
        """A module call returns ``output``; returns what its caller sees (a ``tl.module`` edit
        may replace outputs)."""
        known = [
            (value_id, tensor)
            for tensor in tensors_of(output)
            if (value_id := self.known_id(tensor)) is not None
        ]
        ids = [value_id for value_id, _ in known]
        values = [tensor for _, tensor in known]
        self.session.exit(module_id, ids, values)
        if self.on_exit is None:
            return output
        replaced = self.on_exit(module_id, ids, values)
        if not replaced:
            return output
        by_object = {id(tensor): replaced[value_id] for value_id, tensor in known if value_id in replaced}
        return substitute(output, by_object)

    # ---- ops ----------------------------------------------------------------------------------

    def record(self, func: str, call: Callable[..., Any], args: tuple, kwargs: dict, out: Any) -> Any:
        """Records one op and returns what the caller sees (a live edit may replace outputs)."""
        results = tensors_of(out)
        if not results:
            return out
        single = isinstance(out, Tensor)
        inputs = {id(argument) for argument in args if isinstance(argument, Tensor)}
        inputs.update(id(argument) for argument in kwargs.values() if isinstance(argument, Tensor))
        fresh = []
        primary = PRIMARY_OUTPUTS.get(func)
        for index, result in enumerate(results):
            if primary is not None and index not in primary:
                continue
            if id(result) in inputs:
                # The op handed back its input object: an alias, not a new op (a tensor from
                # outside the forward is declared as what it is, and its tag comes off after).
                self.id_of(result)
                self.aliases += 1
                continue
            if not result._is_initialized():
                continue  # an empty placeholder output (batch_norm's reserve space in eval mode)
            fresh.append((index, result))
        if not fresh:
            return out
        parents, template, keyword_template = argument_template(args, kwargs, Recordable, self.reference)
        outputs = []
        for index, result in fresh:
            value_id = self.tag(result)
            self.values[value_id] = result
            outputs.append((value_id, result, tuple(result.shape), neutral_name(result.dtype)))
            self.records[value_id] = ReplayRecord(
                call, func, template, keyword_template, None if single else index
            )
        self.session.op(func, parents, outputs)
        if self.on_output is None:
            return out
        return self._edited(func, out, outputs)

    def _edited(self, func: str, out: Any, outputs: List[Tuple[int, Any, Any, str]]) -> Any:
        replaced: Dict[int, Any] = {}
        for value_id, value, _shape, _dtype in outputs:
            new = self.on_output(func, value_id, value)
            if new is not value:
                replaced[id(value)] = new
        if not replaced:
            return out
        return substitute(out, replaced)


#: Recorders of the captures running now (captures take turns across threads; a capture
#: inside a traced forward stacks on the same thread). The kernel dispatchers route to the top.
_ACTIVE: List[Recorder] = []

#: (id(owner), attribute) → (the original kernel, its dispatcher), made once per process.
_DISPATCHERS: Dict[Tuple[int, str], Tuple[Any, Callable[..., Any]]] = {}


def _kernel_dispatcher(original: Callable[..., Any], kind: str, name: str) -> Callable[..., Any]:
    """What a kernel attribute holds during a capture: the capturing thread's calls go to the
    active recorder, every other thread (and any call with no capture running) to the kernel."""
    import threading

    get_ident = threading.get_ident
    active = _ACTIVE

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if active:
            recorder = active[-1]
            if get_ident() == recorder.owner_thread:
                return recorder.kernel(kind, name, original, args, kwargs)
        return original(*args, **kwargs)

    return dispatch
