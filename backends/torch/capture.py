"""One capture of a torch model: a function mode sees every torch function, tensor method and
operator, brackets on the model's modules (``module_brackets``) give the module stack; each op
goes to the core through the shared capture session, keyed by ids this adapter gives the tensors.
Everything installed is removed again, also when the forward raises or is interrupted."""

from __future__ import annotations

import itertools
import os
from contextlib import contextmanager
from threading import get_ident
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import torch
from torch.overrides import TorchFunctionMode

from torchlens.adapter_kit import CaptureSession, Patches
from torchlens.adapter_kit.argument_names import argument_names
from torchlens.adapter_kit.live_edits import LiveEditHost, LiveEdits
from torchlens.adapter_kit.replay import ParamRef, ReplayRecord, ValueRef, argument_template
from torchlens.adapter_kit.session import EVENTS_PER_BATCH
from torchlens.adapter_kit.source_location import SourceLocator
from torchlens.adapter_kit.structures import named_arrays, substitute

from .dtypes import NAMES, name_of
from .model_declaration import WalkedModel, declaration_of
from .naming import describe
from .out_of_place import MEMORY_EXPORTS, run_out_of_place, takes_place_of
from .replay_records import ReplayRecords

#: Attribute that carries ``{capture serial: value id}`` on a tensor while captures run. Keyed by
#: serial so that captures on several threads can tag one shared tensor (a parameter, an input)
#: at once, and so that a tag left on a tensor the model kept from an earlier capture (a cache)
#: is never read as a value of this capture.
ID_ATTRIBUTE = "_torchlens_id"

_SERIALS = itertools.count(1)

#: How ``TorchFunctionMode.__enter__``/``__exit__`` push and pop a mode (private to torch; where
#: a version lacks them the native recorder is not pushed as a mode, see ``function_mode``).
_PUSH_MODE = getattr(torch.overrides, "_push_mode", None)
_POP_MODE = getattr(torch.overrides, "_pop_mode", None)

#: How many references a storage has (private to torch; without it no storage is swapped).
_STORAGE_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)

#: Frames inside torch's and TorchLens's own folders are not "user code" for source locations.
_SOURCES = SourceLocator(
    (
        os.path.dirname(torch.__file__) + os.sep,
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep,
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))) + os.sep,
    )
)


class _RecordingMode(TorchFunctionMode):
    """Sees every torch function, tensor method and operator; torch disables the mode while
    ``__torch_function__`` runs, so ops inside an op are not seen twice. Torch keeps function
    modes per thread, so other threads are never recorded."""

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        capture = self.capture
        if capture.quiet_depth:
            return func(*args, **kwargs)
        name, writes_in_place = describe(func)
        if name in MEMORY_EXPORTS:
            capture.memory_exported = True
        in_place = writes_in_place or (bool(kwargs) and kwargs.get("inplace") is True)
        capture.declare_leaves(args, kwargs)
        if capture.holding and args and "out" in kwargs:
            capture.protect(kwargs["out"])
            out = func(*args, **kwargs)
        elif capture.holding and args and in_place:
            out = capture.run_in_place(func, name, args, kwargs)
        else:
            out = func(*args, **kwargs)
        return capture.record(func, name, in_place, args, kwargs, out)


def flatten(value: Any, path: str) -> List[Tuple[str, torch.Tensor]]:
    """Tensors inside nested tuples, lists and dicts, with their paths."""
    return named_arrays(value, torch.Tensor, path)


class Capture(LiveEditHost):
    """State of one ``tl.trace`` call on a torch model, around the shared session; also the
    host of its live edits (``intervene=``, ``stop_after=``) and value-dependent ``save=``."""

    def __init__(self, model: Any, session: CaptureSession, patches: Patches) -> None:
        self.serial = next(_SERIALS)
        #: The thread that runs the capture (the module hooks may be called on any thread).
        self.owner_thread = patches.owner_thread
        self.model = model
        self.session = session
        self.patches = patches
        self.module_ids: Dict[int, int] = {}
        #: The modules of the model's tree, each once (what the module brackets go on).
        self.modules: List[torch.nn.Module] = []
        self.buffer_addresses: Dict[int, str] = {}
        #: Value id → the parameter tensor (replay reads the live parameter).
        self.params: Dict[int, torch.Tensor] = {}
        self.param_dtypes: Dict[int, str] = {}
        #: Storage address → ids of uncopied payloads on it, so an in-place op copies them first.
        #: Built lazily: reading a tensor's storage address costs about a microsecond, and most
        #: captures never run an in-place op; ``_unindexed`` lists the payloads not in it yet.
        self.shared: Dict[int, List[int]] = {}
        self._unindexed: List[int] = []
        #: Whether any payload is held uncopied (the function mode then watches for in-place ops).
        self.holding = False
        #: Version counter of each uncopied payload when it was captured.
        self.versions: Dict[int, int] = {}
        #: ``id()`` of the tensors that outlive the capture (parameters, inputs, buffers): an
        #: in-place op on one never swaps its storage.
        self.lasting: Set[int] = set()
        #: Whether the forward shared some tensor's memory with code TorchLens cannot follow
        #: (``numpy()``, DLPack, a raw address, ``torch.as_tensor`` over an array): from then on
        #: in-place ops copy instead of swapping storage (``out_of_place.MEMORY_EXPORTS``).
        self.memory_exported = False
        #: Value id → how replay re-runs the op that produced it (the native recorder's records
        #: are made when first read, see :mod:`.replay_records`).
        self.replays = ReplayRecords()
        #: Module id → its primary address (what a RecordContext's module stack names).
        self.addresses: Dict[int, str] = {}
        #: The live edits of ``intervene=`` / ``stop_after=`` (None without rules).
        self.edits: Optional[LiveEdits] = None
        #: Above zero while the capture runs torch itself (edit actions, predicates): the mode
        #: passes those calls through unrecorded.
        self.quiet_depth = 0
        #: Gradient capture (``save_grads=``, ``backward_ready=True``, gradient-site edits), or None.
        self.backward: Any = None
        #: Parameter address → the model's parameter tensor (gradients are read from it).
        self.param_tensors: Dict[str, torch.Tensor] = {}
        #: ``id()`` → (tensor, value id) of the tensors named by ``id`` (see the ids section).
        self.pinned: Dict[int, Tuple[torch.Tensor, int]] = {}
        #: Whether op outputs are pinned: when every value is saved they are held to the end
        #: anyway (a streamed capture writes them out and must not hold them).
        request = session.request
        self.pin_outputs = request.save.mode == "all" and request.streaming is None
        #: Whether every op output is held (then ``record`` holds them itself, see
        #: ``CaptureSession.held_op``).
        self.holds_every_output = session.holds_every_output
        #: Which outputs the native recorder keeps (``all``, ``none``, ``selected``; set with it).
        self.recorder_keeping = ""
        #: The native host's one-call recorder of this capture's ops, or None. It holds this
        #: capture's ``_reference``: let go at the end, so the capture is freed by reference
        #: counting, not at the next cyclic collection.
        self.held_recorder = self._held_recorder()
        patches.on_exit(self._release_recorder)
        # Nothing pinned outlives the capture (a tensor the model dropped is let go at the end).
        patches.on_exit(self.pinned.clear)
        # The session holds only what the live plan keeps, through this alias-not-copy hold.
        session.hold = self._kept

    def _held_recorder(self) -> Any:
        """The native host's recorder of this capture's ops (``_native.HeldOpRecorder``, see
        ``backends/torch/native/src/held_op.rs``) when every output is held, none is (``save=False``), or
        a ``save=`` selector's live plan decides them (not a value-dependent one, nothing
        streamed); None otherwise (and on the wasmtime-py host). With a recorder, ``replays``
        gets the store where it keeps its ops' replay facts until they are read
        (``_native.PendingReplays``)."""
        native = self.session.native
        save = self.session.request.save
        if self.holds_every_output and self.pin_outputs:
            self.recorder_keeping = "all"
        elif self.session.holds_no_output:
            self.recorder_keeping = "none"
        elif save.mode == "selected" and not save.value_dependent and self.session.spool is None:
            self.recorder_keeping = "selected"
        else:
            return None
        try:
            # lazy: the native extension is absent from the pure wheel
            from torchlens._native import HeldOpRecorder, PendingReplays, Session
        except ImportError:
            return None  # the pure wheel: no extension
        if not isinstance(native, Session):
            return None  # the wasmtime-py host
        self.replays.pending = PendingReplays(self.params, ValueRef, ParamRef, ReplayRecord)
        return HeldOpRecorder(
            native,
            self.session,
            torch.Tensor,
            self.pinned,
            self.session.payloads,
            self.versions,
            self._unindexed,
            self.replays.pending,
            NAMES,
            self._reference,
            self.protect,
            self.run_in_place,
            self.record,
            self._describe,
            list(_SOURCES.skipped_folders),
            EVENTS_PER_BATCH,
            self.recorder_keeping,
            self.serial,
            ID_ATTRIBUTE,
        )

    def _describe(self, func: Any) -> Tuple[str, bool]:
        """``naming.describe``, noting a call that shares memory (the native recorder asks once
        per callable per capture, so this sees the first call of each)."""
        description = describe(func)
        if description[0] in MEMORY_EXPORTS:
            self.memory_exported = True
        return description

    def _release_recorder(self) -> None:
        self.held_recorder = None

    @contextmanager
    def function_mode(self) -> Iterator[None]:
        """The function mode that sees every op, active for the block. When the native recorder
        may take this capture's ops (no live edit or gradient capture watches them) it is the
        mode itself: torch needs of a mode only a ``__torch_function__`` bound to the object on
        its stack, and calls it with no Python frame between. Otherwise :class:`_RecordingMode`
        (whose ``__torch_function__`` the native one follows; it calls :meth:`record`, the
        Python path, for an op it does not handle)."""
        recorder = self.held_recorder
        watched = self.edits is not None or self.backward is not None
        if recorder is None or watched or _PUSH_MODE is None or _POP_MODE is None:
            with _RecordingMode(self):
                yield
            return
        if self.pin_outputs:
            self.holding = True  # every output it records is held (none is with save=False)
        _PUSH_MODE(recorder)
        try:
            yield
        finally:
            _POP_MODE()

    # ---- ids ---------------------------------------------------------------------------------
    #
    # A tensor's value id is found one of two ways. A tensor this capture holds a reference to
    # until it ends (parameters, inputs, buffers, constants and, when every value is saved, every
    # op output) is looked up by ``id()`` in ``pinned``: an object that is held cannot die, so no
    # other tensor can take its id during the capture. Any other tensor carries an attribute
    # (ID_ATTRIBUTE), which dies with the tensor but costs more to set: a tensor's ``__dict__``
    # is created on first use, about a microsecond on every op output.

    def _tag(self, tensor: torch.Tensor) -> int:
        value_id = self.session.new_value_id()
        self._name(tensor, value_id)
        return value_id

    def _name(self, tensor: torch.Tensor, value_id: int) -> None:
        """Names ``tensor`` as this capture's value ``value_id``."""
        key = id(tensor)
        if self.pin_outputs or key in self.pinned:
            self.pinned[key] = (tensor, value_id)
            return
        tags = tensor.__dict__.get(ID_ATTRIBUTE)
        if tags is None:
            setattr(tensor, ID_ATTRIBUTE, {self.serial: value_id})
        else:
            tags[self.serial] = value_id

    def known_id(self, tensor: torch.Tensor) -> Optional[int]:
        """The value id this capture gave ``tensor``, or None."""
        pinned = self.pinned.get(id(tensor))
        if pinned is not None:
            return pinned[1]
        tags = getattr(tensor, ID_ATTRIBUTE, None)
        return None if tags is None else tags.get(self.serial)

    def untag(self, tensor: torch.Tensor) -> None:
        """Takes this capture's tag off ``tensor`` (other captures' tags stay)."""
        tags = tensor.__dict__.get(ID_ATTRIBUTE)
        if tags is not None:
            tags.pop(self.serial, None)
            if not tags:
                tensor.__dict__.pop(ID_ATTRIBUTE, None)

    def _tag_lasting(self, tensor: torch.Tensor) -> int:
        """Names a tensor that outlives the capture (param, buffer, input): it is pinned, so it
        carries nothing the capture would have to take off again."""
        value_id = self.session.new_value_id()
        self.pinned[id(tensor)] = (tensor, value_id)
        self.lasting.add(id(tensor))
        return value_id

    def _kept(self, value_id: int, tensor: torch.Tensor) -> torch.Tensor:
        """The payload of a value, without a copy: the model's tensor itself until an in-place op
        is about to change it (``protect`` copies it first). Its version counter is recorded, so a
        change made after the capture is detected, never served."""
        # A tensor that needs no gradient is kept as the object itself when outputs are pinned
        # (it carries no tag then); detaching costs half a microsecond per op.
        value = tensor.detach() if tensor.requires_grad or not self.pin_outputs else tensor
        if self.session.spool is not None:
            return value  # streamed: its bytes are written now, nothing is held to protect
        try:
            version = value._version
        except RuntimeError:
            # Inference tensors (torch.inference_mode) keep no version counter: keep a copy.
            return value.clone()
        self.versions[value_id] = version
        self._unindexed.append(value_id)
        self.holding = True
        return value

    def protect(self, target: Any) -> None:
        """Copies every uncopied payload that shares storage with ``target`` before an in-place
        op writes into it. The value ``target`` carries now is retired first: after the write the
        object carries the op's value, so no module call can return the old one, and a payload
        the plan held only for that reason is dropped instead of copied."""
        if not isinstance(target, torch.Tensor):
            return
        current = self.known_id(target)
        if current is not None:
            self.session.retire(current)
        self._copy_payloads_on(target)

    def run_in_place(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        """Runs an op that writes into its first argument (not ``out=``) and returns what it
        returns. When it is sound, out of place, the model's tensor then taking the result's
        storage and the saved value keeping the old one (no copy, see :mod:`.out_of_place`);
        otherwise the old value is copied first (:meth:`protect`) and the op runs as written."""
        target = args[0]
        if self._can_swap(target, args, kwargs):
            result = run_out_of_place(func, name, args, kwargs)
            if result is not None and takes_place_of(result, target):
                self._swap_storage(target, result)
                return target
        self.protect(target)
        return func(*args, **kwargs)

    def _can_swap(self, target: Any, args: tuple, kwargs: dict) -> bool:
        """Whether ``target``'s storage may be replaced instead of written: a plain tensor an op
        of this capture produced, held as its saved value, needing no gradient, not a view, with
        no other tensor on its storage and no memory handed out during the forward; and the
        capture's other machinery (live edits, gradients) not watching."""
        if (
            not self.pin_outputs
            or self.memory_exported
            or self.edits is not None
            or self.backward is not None
            or _STORAGE_USE_COUNT is None
            or type(target) is not torch.Tensor
            or target.layout is not torch.strided
            or target.is_quantized
            or target.requires_grad
            or target._base is not None
            or id(target) in self.lasting
        ):
            return False
        entry = self.pinned.get(id(target))
        if entry is None or entry[0] is not target or self.session.payloads.get(entry[1]) is not target:
            return False
        if torch.is_grad_enabled():
            for argument in (*args, *kwargs.values()):
                if isinstance(argument, torch.Tensor) and argument.requires_grad:
                    return False
        try:
            # Two references: the target's own and the storage object made to ask.
            return _STORAGE_USE_COUNT(target.untyped_storage()._cdata) == 2
        except (RuntimeError, TypeError, NotImplementedError):
            return False  # a tensor with no plain storage (a functorch wrapper, for one)

    def _swap_storage(self, target: torch.Tensor, result: torch.Tensor) -> None:
        """Gives ``target`` the storage of ``result`` (its new value) and keeps its old value
        as the saved payload, under a tensor of its own on the old storage."""
        value_id = self.pinned[id(target)][1]
        self.session.retire(value_id)  # the object is about to carry another value
        # A new tensor on the old storage: ``detach`` makes it in one call (1.1 µs above the op
        # against 2.8 for ``empty`` and ``set_``); it shares ``target``'s version counter, which
        # nothing reads for it: only the capture holds ``old`` (as with a copy).
        old = target.detach()
        self.session.replace_payload(value_id, old)
        self.versions.pop(value_id, None)
        target.set_(result)

    def _index_storages(self) -> None:
        """Adds the payloads held since the last in-place op to ``shared`` (a payload dropped
        since is skipped: the index never keeps a value alive)."""
        payloads = self.session.payloads
        shared = self.shared
        for value_id in self._unindexed:
            value = payloads.get(value_id)
            if value is not None and value_id in self.versions:
                shared.setdefault(value.untyped_storage().data_ptr(), []).append(value_id)
        self._unindexed.clear()

    def _copy_payloads_on(self, target: torch.Tensor) -> None:
        """Copies the uncopied payloads that share ``target``'s storage (it is about to change)."""
        if self._unindexed:
            self._index_storages()
        for value_id in self.shared.pop(target.untyped_storage().data_ptr(), ()):
            if self.versions.pop(value_id, None) is not None:
                value = self.session.payloads.get(value_id)
                if value is not None:
                    self.session.replace_payload(value_id, value.clone())

    def _id_of(self, tensor: torch.Tensor) -> int:
        value_id = self.known_id(tensor)
        if value_id is not None:
            return value_id
        # Not produced inside the forward: a module buffer, or a value from outside.
        value_id = self._tag_lasting(tensor)
        shape, dtype = tuple(tensor.shape), name_of(tensor.dtype)
        copy = tensor.detach().clone()
        address = self.buffer_addresses.get(id(tensor))
        if address is not None:
            self.session.buffer(address, value_id, copy, shape, dtype)
        else:
            self.session.constant(value_id, copy, shape, dtype)
        return value_id

    def declare_leaves(self, args: tuple, kwargs: dict) -> None:
        """Declares the buffers and constants an op is about to read for the first time, their
        values copied now: the op may change them in place (``add_`` on a step counter, a batch
        norm in training updating its running statistics right after reading them), and the trace
        keeps what the op read. A tensor inside a list argument (which no in-place op takes) is
        declared when the op is recorded."""
        for value in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(value, torch.Tensor) and self.known_id(value) is None:
                self._id_of(value)

    def _reference(self, tensor: torch.Tensor) -> Tuple[int, ValueRef]:
        pinned = self.pinned.get(id(tensor))
        if pinned is not None:
            value_id = pinned[1]
        else:
            tags = tensor.__dict__.get(ID_ATTRIBUTE)
            value_id = None if tags is None else tags.get(self.serial)
            if value_id is None:
                value_id = self._id_of(tensor)
        return value_id, ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    # ---- model structure -----------------------------------------------------------------

    def declare_model(self) -> None:
        """Declares every module (shared ones once, with all their addresses), parameter and
        buffer: one walk of the module tree, and the declaration kept from the model's last
        trace when the walk finds nothing changed (see :mod:`.model_declaration`)."""
        session = self.session
        if not isinstance(self.model, torch.nn.Module):
            self.module_ids[id(self.model)] = 0
            self.addresses[0] = "self"
            session.module(0, ["self"], type(self.model).__name__, False, False)
            return
        walked = WalkedModel(self.model)
        declaration = declaration_of(self.model, walked, session.peek_value_id())
        tree = walked.tree
        self.modules = [tree[place][1] for place in declaration.declared_modules]
        # Copies of the declaration's own (ids and names only): the capture adds to them.
        self.module_ids = declaration.module_ids.copy()
        self.addresses = dict(declaration.module_addresses)
        slots = walked.param_slots
        params = [slots[slot] for slot in declaration.declared_params]
        # Parameters outlive the capture: pinned (see the ids section), never tagged. Their ids
        # start where the declaration's do (``declaration_of`` checked it).
        value_ids = session.new_value_ids(len(params))
        self.pinned.update(zip(map(id, params), zip(params, value_ids)))
        self.params.update(zip(value_ids, params))  # the same dict: the native record reads it
        self.param_tensors = dict(zip(declaration.param_addresses, params))
        self.param_dtypes = declaration.param_dtypes_by_value.copy()
        self.buffer_addresses = dict(declaration.buffer_addresses)
        session.declare(declaration.modules, declaration.params, declaration.prepared)

    def declare_inputs(self, args: tuple, kwargs: dict) -> None:
        found: List[Tuple[str, torch.Tensor]] = []
        names = self._argument_names(args, kwargs)
        for name, value in zip(names, list(args) + list(kwargs.values())):
            found.extend(flatten(value, name))
        for path, tensor in found:
            if self.known_id(tensor) is not None:
                continue
            value_id = self._tag_lasting(tensor)
            self.session.input(
                path, value_id, self._kept(value_id, tensor), tuple(tensor.shape), name_of(tensor.dtype)
            )
            if self.backward is not None:
                with self.quiet():
                    self.backward.watch(value_id, tensor)

    def _argument_names(self, args: tuple, kwargs: dict) -> List[str]:
        forward = getattr(self.model, "forward", self.model)
        return argument_names(forward, len(args)) + list(kwargs)

    def declare_outputs(self, output: Any) -> None:
        for path, tensor in flatten(output, "output"):
            value_id = self.known_id(tensor)
            if value_id is None:
                value_id = self._id_of(tensor)
            else:
                # Returned tensors leave the capture: their tag must come off too.
                self.patches.on_exit(lambda tensor=tensor: self.untag(tensor))
            self.session.output(path, value_id)

    # ---- hooks -------------------------------------------------------------------------------

    def _module_id(self, module: torch.nn.Module) -> int:
        module_id = self.module_ids.get(id(module))
        if module_id is None:
            # A module built during the forward: give it an address of its own.
            module_id = len(self.module_ids)
            self.module_ids[id(module)] = module_id
            address = f"{type(module).__name__.lower()}_unregistered_{module_id}"
            self.addresses[module_id] = address
            self.session.module(module_id, [address], type(module).__name__, False, module.training)
        return module_id

    def module_hooks(self) -> Tuple[Callable[..., Any], Callable[..., Any], Any]:
        """The module pre-hook and forward hook, and the native object they belong to: the
        native host's (``_native.ModuleCallHooks``, see ``backends/torch/native/src/module_hooks.rs``)
        when ops are recorded in one call each and no live edit reads module outputs, else
        :meth:`pre_hook` and :meth:`post_hook` (which the native ones hand every call they do not
        handle) and None."""
        # A narrow ``save=`` plan reads the open module calls, which the Python hooks track.
        if self.held_recorder is None or self.edits is not None or self.recorder_keeping == "selected":
            return self.pre_hook, self.post_hook, None
        from torchlens import _native  # lazy: the native extension is absent from the pure wheel

        hooks = _native.ModuleCallHooks(
            self.session.native,
            self.module_ids,
            self.pinned,
            torch.Tensor,
            self.owner_thread,
            self.pre_hook,
            self.post_hook,
            self.serial,
            ID_ATTRIBUTE,
        )
        return hooks.pre, hooks.post, hooks

    def pre_hook(self, module: torch.nn.Module, args: Any) -> None:
        """The module pre-hook (a module bracket's, or a global one for a function root); a
        global hook fires on every thread, only the capturing thread is recorded."""
        if get_ident() != self.owner_thread:
            return
        module_id = self.module_ids.get(id(module))
        self.session.enter(self._module_id(module) if module_id is None else module_id)

    def post_hook(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        """The module forward hook (see :meth:`pre_hook`)."""
        if get_ident() != self.owner_thread:
            return None
        module_id = self.module_ids.get(id(module))
        return self.exit(self._module_id(module) if module_id is None else module_id, output)

    def exit(self, module_id: int, output: Any) -> Any:
        """A module call returns ``output``; returns what the caller gets instead when a
        ``tl.module`` edit replaced part of it (None otherwise, as a forward hook does)."""
        if isinstance(output, torch.Tensor):
            value_id = self.known_id(output)
            value_ids = [] if value_id is None else [value_id]
            values = [] if value_id is None else [output]
        else:
            value_ids, values = [], []
            for _, tensor in flatten(output, ""):
                value_id = self.known_id(tensor)
                if value_id is not None:
                    value_ids.append(value_id)
                    values.append(tensor)
        self.session.exit(module_id, value_ids, values)
        if self.edits is None:
            return None
        replaced = self.edits.on_exit(module_id, value_ids, values)
        if not replaced:
            return None
        return substitute(output, {id(values[value_ids.index(key)]): new for key, new in replaced.items()})

    # ---- live edits (the LiveEditHost side) ------------------------------------------------------

    @contextmanager
    def quiet(self) -> Iterator[None]:
        self.quiet_depth += 1
        try:
            yield
        finally:
            self.quiet_depth -= 1

    def adopt(self, value_id: int, value: torch.Tensor) -> None:
        self._name(value, value_id)
        if value_id in self.session.payloads:
            with self.quiet():
                self.session.replace_payload(value_id, self._kept(value_id, value))

    def module_stack(self) -> List[str]:
        return self.session.open_module_calls(self.addresses)

    def value_facts(self, value: torch.Tensor) -> Dict[str, Any]:
        scalar_bool = value.dtype == torch.bool and value.numel() == 1
        return {
            "shape": tuple(value.shape),
            "dtype": name_of(value.dtype),
            "tensor_requires_grad": value.requires_grad,
            "is_scalar_bool": scalar_bool,
            "bool_value": bool(value.item()) if scalar_bool else None,
        }

    def is_value(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def same_dtype(self, new: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return new if new.dtype == like.dtype else new.to(like.dtype)

    def copy(self, value: torch.Tensor) -> torch.Tensor:
        return value.clone()

    # ---- ops ---------------------------------------------------------------------------------

    def record(self, func: Any, name: str, in_place: bool, args: tuple, kwargs: dict, out: Any) -> Any:
        """Reports one op (``name``: how the trace names ``func``; ``in_place``: whether it wrote
        into its first argument); returns what flows on (``out``, or its live-edited
        replacement)."""
        # The hot path of every capture: locals and inline lookups, no helper call per output.
        if isinstance(out, torch.Tensor):
            results: tuple = (out,)
            multiple = False
        elif isinstance(out, (tuple, list)):
            results = tuple(item for item in out if isinstance(item, torch.Tensor))
            if not results:
                return out
            multiple = True
        elif out is None and name == "__setitem__" and args and isinstance(args[0], torch.Tensor):
            results = (args[0],)
            multiple = True
        else:
            return out
        # Frame 0 is this method; frame 1 is the function mode (TorchLens code, skipped) or, when
        # the native recorder hands the op over, the op's caller itself.
        source = _SOURCES.locate(1)
        parents, template, keyword_template = argument_template(args, kwargs, torch.Tensor, self._reference)
        described = []
        replays = self.replays
        new_value_id = self.session.new_value_id
        serial = self.serial
        pinned = self.pinned
        pin_outputs = self.pin_outputs
        for index, result in enumerate(results):
            value_id = new_value_id()
            key = id(result)
            if pin_outputs or key in pinned:
                pinned[key] = (result, value_id)
            else:
                tags = result.__dict__.get(ID_ATTRIBUTE)
                if tags is None:
                    setattr(result, ID_ATTRIBUTE, {serial: value_id})
                else:
                    tags[serial] = value_id
            dtype = result.dtype
            described.append((value_id, result.shape, NAMES.get(dtype) or name_of(dtype), value_id))
            replays[value_id] = ReplayRecord(
                func, name, template, keyword_template, index if multiple else None
            )
        session = self.session
        if self.holds_every_output:
            # Nothing to decide per output: each is held here, and the op reported as held.
            payloads = session.payloads
            kept = self._kept
            for (value_id, *_), result in zip(described, results):
                payloads[value_id] = kept(value_id, result)
            session.held_op(name, parents, described, in_place, source)
        else:
            outputs = [
                (value_id, result, shape, dtype)
                for (value_id, shape, dtype, _), result in zip(described, results)
            ]
            session.op(name, parents, outputs, in_place, (), source)
        if self.backward is not None:
            with self.quiet():
                for (value_id, *_), result in zip(described, results):
                    self.backward.watch(value_id, result)
        edits = self.edits
        if edits is None:
            return out
        replaced: Dict[int, torch.Tensor] = {}
        for index, ((value_id, *_), result) in enumerate(zip(described, results)):
            new = edits.on_output(name, value_id, result, index)
            if new is not result:
                replaced[id(result)] = new
        if not replaced:
            return out
        target = results[0]
        if out is None or (in_place and args and out is args[0]):
            # An in-place op's result is the object the model keeps using: write the edit into
            # it, after copying what must not change (the pre-edit value replay compares with,
            # payloads that share its storage).
            value_id = described[0][0]
            actions, original = edits.fired[value_id]
            with self.quiet():
                if original is target:
                    edits.fired[value_id] = (actions, original.clone())
                self._copy_payloads_on(target)
                target.copy_(replaced[id(target)])
            return out
        return substitute(out, replaced)
