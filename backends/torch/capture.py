"""One capture of a torch model: install the function mode and module hooks, run the forward,
report every op to the core as raw events, and remove everything again, also when the forward
raises."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from .dtypes import name_of
from .naming import func_name, is_in_place

#: Attribute that carries a tensor's capture id while a capture runs.
ID_ATTRIBUTE = "_torchlens_id"

#: Frames inside these folders are not "user code" for source locations.
_SKIPPED_FOLDERS = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep,
)

#: Ops between flushes when a live selection plan needs decisions.
_FLUSH_EVERY = 64


class ReplaySlot:
    """A tensor argument in a replay template: the value of op ``op``."""

    __slots__ = ("op",)

    def __init__(self, op: int) -> None:
        self.op = op


class _RecordingMode(TorchFunctionMode):
    """Sees every torch function, tensor method and operator; torch disables the mode while
    ``__torch_function__`` runs, so ops inside an op are not seen twice."""

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        capture = self.capture
        if (
            capture.shared
            and args
            and (is_in_place(func_name(func)) or "out" in kwargs or kwargs.get("inplace") is True)
        ):
            capture.protect(kwargs.get("out", args[0]))
        out = func(*args, **kwargs)
        self.capture.record(func, args, kwargs, out)
        return out


def _flatten(value: Any, path: str, found: List[Tuple[str, torch.Tensor]]) -> None:
    """Tensors inside nested tuples, lists and dicts, with their paths."""
    if isinstance(value, torch.Tensor):
        found.append((path, value))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            _flatten(item, f"{path}.{index}", found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{path}.{key}", found)


class Capture:
    """State of one ``tl.trace`` call on a torch model."""

    def __init__(self, model: Any, session: Any, save_all: bool, live_plan: bool) -> None:
        self.model = model
        self.session = session
        self.save_all = save_all
        self.live_plan = live_plan
        self.payloads: Dict[int, torch.Tensor] = {}
        self.selected: set = set()
        self.constant_slots: set = set()
        self.next_id = 1
        self.module_ids: Dict[int, int] = {}
        self.buffer_addresses: Dict[int, str] = {}
        self.tagged: List[torch.Tensor] = []
        self.ops_since_flush = 0
        #: Payload slot of each op, indexed by the op id the core assigns (ops are numbered in
        #: the order their events arrive, so the adapter can follow along).
        self.op_slots: List[Optional[int]] = []
        #: Tensor id → the op that produced it (for replay templates).
        self.producer_op: Dict[int, int] = {}
        #: Tensor ids of parameters (replay reads the live parameter).
        self.param_tensors: Dict[int, torch.Tensor] = {}
        #: Slots whose payload is the model's own tensor (no copy), by storage address, so an
        #: in-place op can copy them first.
        self.shared: Dict[int, List[int]] = {}
        #: Version counter of each uncopied payload when it was captured.
        self.versions: Dict[int, int] = {}
        #: Op id → (func, args template, kwargs template, output index): what replay re-runs.
        self.replays: Dict[int, tuple] = {}

    # ---- ids ---------------------------------------------------------------------------------

    def _op_created(self, tensor_id: Optional[int], slot: Optional[int]) -> int:
        """Follows the core's op numbering (ops are numbered in event order)."""
        op = len(self.op_slots)
        self.op_slots.append(slot)
        if tensor_id is not None:
            self.producer_op[tensor_id] = op
        return op

    def _placeholder(self, tensor_id: int) -> Any:
        """What a replay template holds for a tensor argument."""
        param = self.param_tensors.get(tensor_id)
        return param if param is not None else ReplaySlot(self.producer_op.get(tensor_id, -1))

    def _tag(self, tensor: torch.Tensor) -> int:
        tensor_id = self.next_id
        self.next_id += 1
        setattr(tensor, ID_ATTRIBUTE, tensor_id)
        return tensor_id

    def _tag_lasting(self, tensor: torch.Tensor) -> int:
        """Tags a tensor that outlives the capture (param, buffer, input): untagged at the end."""
        self.tagged.append(tensor)
        return self._tag(tensor)

    def _keep(self, tensor_id: int, tensor: torch.Tensor) -> Optional[int]:
        """Keeps a value without copying it: the model's tensor itself is the payload until an
        in-place op is about to change it (then ``protect`` copies it first). Its version
        counter is recorded, so a change made after the capture is detected, never served."""
        if not self.save_all and not self.live_plan:
            return None
        value = tensor.detach()
        self.payloads[tensor_id] = value
        self.versions[tensor_id] = value._version
        self.shared.setdefault(value.untyped_storage().data_ptr(), []).append(tensor_id)
        return tensor_id

    def protect(self, target: Any) -> None:
        """Copies every uncopied payload that shares storage with ``target`` before an
        in-place op writes into it."""
        if not self.shared or not isinstance(target, torch.Tensor):
            return
        for slot in self.shared.pop(target.untyped_storage().data_ptr(), ()):
            if self.versions.pop(slot, None) is not None and slot in self.payloads:
                self.payloads[slot] = self.payloads[slot].clone()

    def _id_of(self, tensor: torch.Tensor) -> int:
        tensor_id = getattr(tensor, ID_ATTRIBUTE, None)
        if tensor_id is not None:
            return tensor_id
        # Not produced inside the forward: a module buffer, or a value from outside.
        tensor_id = self._tag_lasting(tensor)
        shape, dtype = tuple(tensor.shape), name_of(tensor.dtype)
        address = self.buffer_addresses.get(id(tensor))
        payload = tensor_id
        self.payloads[tensor_id] = tensor.detach().clone()
        self.constant_slots.add(tensor_id)
        if address is not None:
            self.session.buffer(address, tensor_id, shape, dtype, payload)
        else:
            self.session.constant(tensor_id, shape, dtype, payload)
        self._op_created(tensor_id, payload)
        return tensor_id

    # ---- model structure -----------------------------------------------------------------

    def declare_model(self) -> None:
        """Declares every module (shared ones once, with all their addresses), parameter and
        buffer, in one walk of the module tree."""
        if not isinstance(self.model, torch.nn.Module):
            self.module_ids[id(self.model)] = 0
            self.session.module(0, ["self"], type(self.model).__name__, False, False)
            return
        addresses: Dict[int, List[str]] = {}
        modules: List[Tuple[str, torch.nn.Module]] = []
        for name, module in self.model.named_modules(remove_duplicate=False):
            known = addresses.get(id(module))
            if known is None:
                addresses[id(module)] = [name or "self"]
                modules.append((name, module))
            else:
                known.append(name or "self")
        containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
        for _name, module in modules:
            module_id = len(self.module_ids)
            self.module_ids[id(module)] = module_id
            self.session.module(
                module_id,
                addresses[id(module)],
                type(module).__name__,
                isinstance(module, containers),
                module.training,
            )
        seen = set()
        for name, module in modules:
            prefix = f"{name}." if name else ""
            module_id = self.module_ids[id(module)]
            for parameter_name, param in module._parameters.items():
                if param is None or id(param) in seen:
                    continue
                seen.add(id(param))
                param_id = self._tag_lasting(param)
                self.param_tensors[param_id] = param
                self.session.param(
                    param_id,
                    prefix + parameter_name,
                    module_id,
                    tuple(param.shape),
                    name_of(param.dtype),
                    param.requires_grad,
                )
            for buffer_name, buffer in module._buffers.items():
                if buffer is not None:
                    self.buffer_addresses.setdefault(id(buffer), prefix + buffer_name)

    def declare_inputs(self, args: tuple, kwargs: dict) -> None:
        found: List[Tuple[str, torch.Tensor]] = []
        names = self._argument_names(args, kwargs)
        for name, value in zip(names, list(args) + list(kwargs.values())):
            _flatten(value, name, found)
        for path, tensor in found:
            if getattr(tensor, ID_ATTRIBUTE, None) is not None:
                continue
            tensor_id = self._tag_lasting(tensor)
            slot = self._keep(tensor_id, tensor)
            self.session.input(path, tensor_id, tuple(tensor.shape), name_of(tensor.dtype), slot)
            self._op_created(tensor_id, slot)

    def _argument_names(self, args: tuple, kwargs: dict) -> List[str]:
        forward = getattr(self.model, "forward", self.model)
        try:
            parameters = list(inspect.signature(forward).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        names = []
        for index in range(len(args)):
            parameter = parameters[index] if index < len(parameters) else None
            if parameter is None or parameter.kind is inspect.Parameter.VAR_POSITIONAL:
                names.append(f"args.{index}")
            else:
                names.append(parameter.name)
        return names + list(kwargs)

    def declare_outputs(self, output: Any) -> None:
        found: List[Tuple[str, torch.Tensor]] = []
        _flatten(output, "output", found)
        for path, tensor in found:
            tensor_id = getattr(tensor, ID_ATTRIBUTE, None)
            if tensor_id is None:
                tensor_id = self._id_of(tensor)
            self.session.output(path, tensor_id)
            self._op_created(None, None)

    # ---- hooks -------------------------------------------------------------------------------

    def _module_id(self, module: torch.nn.Module) -> int:
        module_id = self.module_ids.get(id(module))
        if module_id is None:
            # A module built during the forward: give it an address of its own.
            module_id = len(self.module_ids)
            self.module_ids[id(module)] = module_id
            address = f"{type(module).__name__.lower()}_unregistered_{module_id}"
            self.session.module(module_id, [address], type(module).__name__, False, module.training)
        return module_id

    def pre_hook(self, module: torch.nn.Module, args: Any) -> None:
        self.session.enter(self._module_id(module))

    def post_hook(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor):
            outputs = [getattr(output, ID_ATTRIBUTE, None)]
        else:
            found: List[Tuple[str, torch.Tensor]] = []
            _flatten(output, "", found)
            outputs = [getattr(tensor, ID_ATTRIBUTE, None) for _, tensor in found]
        self.session.exit(
            self._module_id(module), [tensor_id for tensor_id in outputs if tensor_id is not None]
        )

    # ---- ops ---------------------------------------------------------------------------------

    def record(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        name = func_name(func)
        if isinstance(out, torch.Tensor):
            results: tuple = (out,)
        elif isinstance(out, (tuple, list)):
            results = tuple(item for item in out if isinstance(item, torch.Tensor))
            if not results:
                return
        elif out is None and name == "__setitem__" and args and isinstance(args[0], torch.Tensor):
            results = (args[0],)
        else:
            return
        parents = []
        template = []
        position = 0
        for argument in args:
            if isinstance(argument, torch.Tensor):
                tensor_id = self._id_of(argument)
                parents.append((tensor_id, position))
                template.append(self._placeholder(tensor_id))
            elif isinstance(argument, (tuple, list)) and any(
                isinstance(item, torch.Tensor) for item in argument
            ):
                items = []
                for item in argument:
                    if isinstance(item, torch.Tensor):
                        tensor_id = self._id_of(item)
                        parents.append((tensor_id, position))
                        items.append(self._placeholder(tensor_id))
                    else:
                        items.append(item)
                template.append(type(argument)(items) if isinstance(argument, tuple) else items)
            else:
                template.append(argument)
            position += 1
        keyword_template = {}
        for key, argument in kwargs.items():
            if isinstance(argument, torch.Tensor):
                tensor_id = self._id_of(argument)
                parents.append((tensor_id, position))
                keyword_template[key] = self._placeholder(tensor_id)
            else:
                keyword_template[key] = argument
            position += 1
        outputs = []
        multiple = len(results) > 1 or not isinstance(out, torch.Tensor)
        for index, result in enumerate(results):
            tensor_id = self._tag(result)
            slot = self._keep(tensor_id, result)
            outputs.append((tensor_id, result.shape, name_of(result.dtype), slot))
            op = self._op_created(tensor_id, slot)
            self.replays[op] = (func, name, tuple(template), keyword_template, index if multiple else None)
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED_FOLDERS):
            frame = frame.f_back
        source = None if frame is None else (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        in_place = is_in_place(name) or kwargs.get("inplace") is True
        self.session.op(name, parents, outputs, in_place, [], source)
        if self.live_plan:
            self.ops_since_flush += 1
            if self.ops_since_flush >= _FLUSH_EVERY:
                self.flush()

    # ---- selection ---------------------------------------------------------------------------

    def flush(self) -> None:
        self.ops_since_flush = 0
        self.apply(self.session.flush())

    def apply(self, decisions: List[Tuple[int, bool]]) -> None:
        """Drops the payloads of ops the plan did not select (the single-pass memory saving)."""
        if not decisions:
            return
        for op, selected in decisions:
            slot = self.op_slots[op] if op < len(self.op_slots) else None
            if slot is None:
                continue
            if selected:
                self.selected.add(op)
            elif slot not in self.constant_slots:
                self.payloads.pop(slot, None)
                self.versions.pop(slot, None)

    # ---- cleanup -----------------------------------------------------------------------------

    def untag(self) -> None:
        for tensor in self.tagged:
            try:
                delattr(tensor, ID_ATTRIBUTE)
            except AttributeError:
                pass
        self.tagged.clear()
