"""What a trace declares about a torch module tree (every module under its addresses, every
parameter once, the buffers' addresses), worked out by one walk of the tree and kept per model,
so the next trace of the same model only checks that nothing changed.

The check is a flat list of facts read in the walk every trace: each address with its module's
identity, class and training flag, each parameter slot with its parameter's identity, dtype,
shape and ``requires_grad``, each buffer slot with its tensor's identity. Equal facts give an
equal declaration (modules and parameters numbered by walk order), so the kept one is reused;
any difference (a module added or replaced, ``model.eval()``, a parameter swapped, cast or
frozen, a buffer reassigned) builds a new one. On a fifty-layer model the walk with the check
costs about a third of building the declaration again.

Kept declarations hold no model object: only names, classes, dtypes, shapes and ``id()``
values. An ``id()`` taken from a live object in this walk can equal one from an earlier walk
only for an object in the same place, whose facts are then checked like any other."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch

from .dtypes import NAMES, name_of

#: What the core is told about a module: (module id, its addresses, class name, is a container,
#: training).
ModuleFacts = Tuple[int, List[str], str, bool, bool]

#: What the core is told about a parameter: (value id, address, owning module id, shape, dtype
#: name, trainable).
ParamFacts = Tuple[int, str, int, Any, str, bool]

_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict)


def module_tree(root: torch.nn.Module) -> List[Tuple[str, torch.nn.Module]]:
    """Every module under ``root`` with its address, in ``named_modules`` order (parents before
    children, children in registration order), a shared module once per address; a loop over
    ``_modules`` rather than ``named_modules``' recursive generators, which cost a tenth of a
    millisecond per trace on a fifty-layer model."""
    found = []
    stack: List[Tuple[str, torch.nn.Module]] = [("", root)]
    while stack:
        name, module = stack.pop()
        found.append((name, module))
        children = module._modules
        if children:
            prefix = f"{name}." if name else ""
            for child_name, child in reversed(children.items()):
                if child is not None:
                    stack.append((prefix + child_name, child))
    return found


class ModelDeclaration:
    """One model's declaration, valid for the walk whose ``facts`` it was built from.

    ``modules`` and ``params`` are what the core is told (parameter value ids counted from
    ``first_value_id``); ``declared_modules`` picks each module's first place in the tree walk,
    ``declared_params`` each declared parameter's place among the parameter slots the walk
    visits (a shared module or parameter is declared once)."""

    __slots__ = (
        "facts",
        "modules",
        "params",
        "first_value_id",
        "declared_modules",
        "declared_params",
        "module_addresses",
        "param_addresses",
        "param_dtypes",
        "buffer_addresses",
        "module_ids",
        "param_dtypes_by_value",
        "prepared",
    )

    def __init__(self, facts: List[Any]) -> None:
        self.facts = facts
        self.modules: List[ModuleFacts] = []
        self.params: List[ParamFacts] = []
        self.first_value_id = 0
        self.declared_modules: List[int] = []
        self.declared_params: List[int] = []
        #: Module id → its primary address.
        self.module_addresses: Dict[int, str] = {}
        self.param_addresses: List[str] = []
        self.param_dtypes: List[str] = []
        #: ``id()`` of a buffer → its first address.
        self.buffer_addresses: Dict[int, str] = {}
        #: ``id()`` of each declared module → its module id (a capture copies it, then adds to it).
        self.module_ids: Dict[int, int] = {}
        #: Parameter value id → its dtype name.
        self.param_dtypes_by_value: Dict[int, str] = {}
        #: The hosts' encoded events of ``modules`` and ``params`` (see ``CaptureSession.declare``).
        self.prepared: Dict[type, Any] = {}


class WalkedModel:
    """One walk of a model: the check's facts and the objects it visited, in walk order (every
    address's module; every parameter slot's parameter, None where a slot is empty)."""

    __slots__ = ("facts", "modules", "tree", "param_slots")

    def __init__(self, root: torch.nn.Module) -> None:
        self.tree = module_tree(root)
        facts: List[Any] = []
        add = facts.extend
        param_slots: List[Optional[torch.Tensor]] = []
        for name, module in self.tree:
            add((name, id(module), type(module), module.training))
            parameters = module._parameters
            if parameters:
                for parameter_name, param in parameters.items():
                    param_slots.append(param)
                    if param is None:
                        add((parameter_name, None))
                    else:
                        add((parameter_name, id(param), param.dtype, param.shape, param.requires_grad))
            buffers = module._buffers
            if buffers:
                for buffer_name, buffer in buffers.items():
                    add((buffer_name, id(buffer)))
        self.facts = facts
        self.param_slots = param_slots


def build_declaration(walked: WalkedModel, first_value_id: int) -> ModelDeclaration:
    """The declaration of a walked model, parameters numbered from ``first_value_id``."""
    declaration = ModelDeclaration(walked.facts)
    declaration.first_value_id = first_value_id
    addresses: Dict[int, List[str]] = {}
    first_places: List[int] = []
    for place, (name, module) in enumerate(walked.tree):
        known = addresses.get(id(module))
        if known is None:
            addresses[id(module)] = [name or "self"]
            first_places.append(place)
        else:
            known.append(name or "self")
    module_ids: Dict[int, int] = {}
    for place in first_places:
        module = walked.tree[place][1]
        module_id = len(module_ids)
        module_ids[id(module)] = module_id
        names = addresses[id(module)]
        declaration.module_addresses[module_id] = names[0]
        declaration.modules.append(
            (module_id, names, type(module).__name__, isinstance(module, _CONTAINERS), module.training)
        )
    declaration.declared_modules = first_places
    declaration.module_ids = module_ids
    # Parameter slots are visited for every address; a shared module's slots, and a parameter
    # shared by several modules, are declared once (at the first module that holds it).
    declared: Dict[int, int] = {}
    slot = 0
    value_id = first_value_id
    for name, module in walked.tree:
        parameters = module._parameters
        first_visit = module_ids.get(id(module)) is not None and addresses[id(module)][0] == (name or "self")
        if parameters:
            prefix = f"{name}." if name else ""
            for parameter_name, param in parameters.items():
                if first_visit and param is not None and id(param) not in declared:
                    declared[id(param)] = slot
                    dtype = NAMES.get(param.dtype) or name_of(param.dtype)
                    address = prefix + parameter_name
                    declaration.declared_params.append(slot)
                    declaration.param_addresses.append(address)
                    declaration.param_dtypes.append(dtype)
                    declaration.params.append(
                        (value_id, address, module_ids[id(module)], param.shape, dtype, param.requires_grad)
                    )
                    value_id += 1
                slot += 1
        buffers = module._buffers
        if first_visit and buffers:
            prefix = f"{name}." if name else ""
            for buffer_name, buffer in buffers.items():
                if buffer is not None:
                    declaration.buffer_addresses.setdefault(id(buffer), prefix + buffer_name)
    declaration.param_dtypes_by_value = dict(zip(range(first_value_id, value_id), declaration.param_dtypes))
    return declaration


#: ``id(model)`` → (a weak reference to the model, its declaration from the last trace).
_KEPT: Dict[int, Tuple[weakref.ref, ModelDeclaration]] = {}
_KEPT_LOCK = threading.Lock()


def declaration_of(model: torch.nn.Module, walked: WalkedModel, first_value_id: int) -> ModelDeclaration:
    """The declaration for this walk of ``model``: the one kept from its last trace when the
    walk found the same facts (and parameters are numbered from the same id), else a new one,
    kept for the next trace."""
    key = id(model)
    kept = _KEPT.get(key)
    if kept is not None and kept[0]() is model:
        declaration = kept[1]
        if declaration.first_value_id == first_value_id and declaration.facts == walked.facts:
            return declaration
    declaration = build_declaration(walked, first_value_id)
    try:
        reference = weakref.ref(model, lambda _, key=key: _forget(key))
    except TypeError:
        return declaration  # not weakly referenceable: nothing is kept
    with _KEPT_LOCK:
        _KEPT[key] = (reference, declaration)
    return declaration


def _forget(key: int) -> None:
    """A kept model died: its declaration goes too (unless a new model already took its id)."""
    with _KEPT_LOCK:
        kept = _KEPT.get(key)
        if kept is not None and kept[0]() is None:
            del _KEPT[key]
