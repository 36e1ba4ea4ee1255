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
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import paddle
from paddle import _C_ops

from torchlens.adapter_kit.recorder import Recorder as KitRecorder
from torchlens.adapter_kit.replay import ReplayRecord, argument_template
from torchlens.adapter_kit.structures import arrays_in

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


class Recorder(KitRecorder):
    """State of one Paddle capture around a session (the real capture session, or a shadow one
    for the gradient pass): the kit's recorder, with Paddle's tags and kernels."""

    array_type = Tensor

    def __init__(self, session: Any, patches: Any) -> None:
        super().__init__(session, patches.owner_thread)
        self.serial = next(_SERIALS)
        self.patches = patches
        self.aliases = 0
        #: Value id → inplace version of the payload when it was held.
        self.versions: Dict[int, int] = {}

    # ---- Paddle's facts ---------------------------------------------------------------------------

    def dtype_of(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def module_children(self, layer: Any) -> Any:
        return layer._sub_layers.items()

    def owned_params(self, layer: Any) -> Any:
        return layer._parameters.items()

    def owned_buffers(self, layer: Any) -> Any:
        return layer._buffers.items()

    def is_container(self, layer: Any) -> bool:
        return isinstance(layer, _CONTAINERS)

    def is_trainable(self, param: Any) -> bool:
        return not param.stop_gradient

    def outside_value(self, value: Any) -> Any:
        # Paddle tensors change in place: a value from outside is kept as a copy.
        return value.detach().clone()

    # ---- ids: a (capture serial, value id) tag on the tensor ---------------------------------------

    def retag(self, value_id: int, value: Any) -> None:
        setattr(value, ID_ATTRIBUTE, (self.serial, value_id))

    def tag_lasting(self, tensor: Any) -> int:
        """Tags a tensor that outlives the capture (parameter, buffer, input, output): the tag
        comes off when the capture ends."""
        self.patches.on_exit(lambda: tensor.__dict__.pop(ID_ATTRIBUTE, None))
        return self.tag(tensor)

    def known_id(self, tensor: Any) -> Optional[int]:
        tag = getattr(tensor, ID_ATTRIBUTE, None)
        return tag[1] if tag is not None and tag[0] == self.serial else None

    def adopt(self, value_id: int, tensor: Any) -> None:
        if value_id in self.session.payloads:
            self.versions[value_id] = tensor._inplace_version()
        super().adopt(value_id, tensor)

    # ---- live edits' host ---------------------------------------------------------------------------

    def value_facts(self, value: Any) -> Dict[str, Any]:
        scalar_bool = value.dtype == paddle.bool and int(value.size) == 1
        return {
            "shape": tuple(value.shape),
            "dtype": neutral_name(value.dtype),
            "tensor_requires_grad": not value.stop_gradient,
            "is_scalar_bool": scalar_bool,
            "bool_value": bool(value.item()) if scalar_bool else None,
        }

    def same_dtype(self, new: Any, like: Any) -> Any:
        return new if new.dtype == like.dtype else new.astype(like.dtype)

    def copy(self, value: Any) -> Any:
        return value.clone()

    # ---- wrappers -----------------------------------------------------------------------------

    def install(self, patches: Any) -> None:
        """Wraps the kernels, the tensor methods and ``Layer.__call__`` for this capture."""
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
            patches.wrap(Tensor, name, self.op_wrapper(op_name(name)))
        for name in surface["tensor_in_place"]:
            patches.wrap(
                Tensor, name, self.refusing_wrapper(lambda name=name: refusals.in_place(f"Tensor.{name}"))
            )
        for name in surface["tensor_escapes"]:
            patches.wrap(
                Tensor, name, self.refusing_wrapper(lambda name=name: refusals.escape(f"Tensor.{name}"))
            )
        for name in inventory.TENSOR_QUIET:
            patches.wrap(Tensor, name, self.quiet_wrapper)
        patches.wrap(paddle.nn.Layer, "__call__", self.module_call_wrapper)

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
        return self.edited_outputs(func, out, outputs)


#: Recorders of the captures running now (captures take turns across threads; a capture
#: inside a traced forward stacks on the same thread). The kernel dispatchers route to the top.
_ACTIVE: List[Recorder] = []

#: (id(owner), attribute) → (the original kernel, its dispatcher), made once per process.
_DISPATCHERS: Dict[Tuple[int, str], Tuple[Any, Callable[..., Any]]] = {}


def _kernel_dispatcher(original: Callable[..., Any], kind: str, name: str) -> Callable[..., Any]:
    """What a kernel attribute holds during a capture: the capturing thread's calls go to the
    active recorder, every other thread (and any call with no capture running) to the kernel."""
    get_ident = threading.get_ident
    active = _ACTIVE

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if active:
            recorder = active[-1]
            if get_ident() == recorder.owner_thread:
                return recorder.kernel(kind, name, original, args, kwargs)
        return original(*args, **kwargs)

    return dispatch
