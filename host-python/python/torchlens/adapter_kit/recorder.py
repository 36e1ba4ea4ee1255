"""The recorder skeleton every wrapper-based capture stands on: value identity, the model's
structure (modules, parameters, buffers, inputs, constants from outside the forward), module
calls and their exits, and the live-edit seams (an op's outputs and a module call's outputs
may be replaced before the caller sees them).

A backend subclasses :class:`Recorder` and supplies only its framework's facts (the array type,
a value's dtype, how modules list their children and own their values) and its op
interception, which reports each op with :meth:`Recorder.edited_outputs` after declaring it to
the session. Identity defaults to the Python object (held for the capture, so its ``id`` is not
reused); a framework whose arrays carry their own tag overrides :meth:`Recorder.known_id`,
:meth:`Recorder.tag` and :meth:`Recorder.retag`."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .live_edits import LiveEditHost
from .module_walk import ModuleTree, ModuleWalk
from .replay import ParamRef, ReplayRecord, ValueRef, argument_template
from .structures import arrays_in, substitute

#: ``(value id, value, shape, dtype)`` of one op output, as :meth:`CaptureSession.op` takes it.
OutputFact = Tuple[int, Any, Tuple[int, ...], str]


class Recorder(LiveEditHost):
    """One capture's record of values around a session (the real capture session, or a
    :class:`~torchlens.adapter_kit.derived_grads.ShadowSession` for a gradient pass)."""

    #: The framework's array type (what counts as a value in arguments and outputs).
    array_type: type = object

    def __init__(self, session: Any, owner_thread: Optional[int] = None) -> None:
        self.session = session
        self.owner_thread = threading.get_ident() if owner_thread is None else owner_thread
        #: Nesting of wrapped calls: only the outermost call records; above zero, wrappers pass
        #: straight through (the capture's own copies and host reads).
        self.depth = 0
        #: ``id(value)`` → value id, for values identified by their Python object.
        self.ids: Dict[int, int] = {}
        #: Objects whose ``id`` keys :attr:`ids` (held, so no id is reused during the capture).
        self.alive: List[Any] = []
        #: Value id → every recorded value (runtime-only: replay reads these whatever ``save=``
        #: keeps).
        self.values: Dict[int, Any] = {}
        #: Value id → how replay re-runs the op that produced it.
        self.records: Dict[int, ReplayRecord] = {}
        #: Value id → parameter (replay reads the live parameter), its dtype and its address.
        self.params: Dict[int, Any] = {}
        self.param_dtypes: Dict[int, str] = {}
        self.param_addresses: Dict[int, str] = {}
        #: ``id(buffer)`` → its address (a buffer is declared when the forward first reads it).
        self.buffer_addresses: Dict[int, str] = {}
        #: ``id(parameter)`` → ``(address, module id, parameter)`` of a parameter declared when
        #: the forward first reads it (:meth:`defer`).
        self.deferred: Dict[int, Tuple[str, int, Any]] = {}
        #: ``id(module)`` → module id, and module id → its primary address.
        self.module_ids: Dict[int, int] = {}
        self.addresses: Dict[int, str] = {0: "self"}
        self.walk: Optional[ModuleWalk] = None
        #: Live edits' seams: ``(func, value id, value) -> value`` on every op output before the
        #: caller sees it, ``(module id, value ids, values) -> {value id: replacement}`` after each
        #: module call returns. None when the capture edits nothing.
        self.on_output: Optional[Callable[[str, int, Any], Any]] = None
        self.on_exit: Optional[Callable[[int, List[int], List[Any]], Dict[int, Any]]] = None
        #: Reasons the capture may be incomplete, noted as the forward runs (in order, once each).
        self.ceilings: Dict[str, None] = {}
        #: Value ids of values read from outside whose producer ran in the forward unseen
        #: (:meth:`unresolved_producer`; replay's ``ReplayRuntime.unresolved``).
        self.unresolved: Set[int] = set()

    # ---- framework facts (a backend overrides these) -------------------------------------------

    def dtype_of(self, value: Any) -> str:
        """The core's dtype name of a value."""
        raise NotImplementedError

    def shape_of(self, value: Any) -> Tuple[int, ...]:
        """A value's shape."""
        return tuple(value.shape)

    def arrays_of(self, structure: Any) -> List[Any]:
        """The arrays of a returned structure, in order (nested tuples, lists and dicts)."""
        return arrays_in(structure, self.array_type)

    def module_children(self, module: Any) -> Iterable[Tuple[str, Any]]:
        """``(attribute name, child module)`` pairs of a module, in the framework's order."""
        return ()

    def owned_params(self, module: Any) -> Iterable[Tuple[str, Any]]:
        """``(name, parameter)`` pairs a module owns itself."""
        return ()

    def owned_buffers(self, module: Any) -> Iterable[Tuple[str, Any]]:
        """``(name, buffer)`` pairs a module owns itself (declared when the forward reads them)."""
        return ()

    def is_container(self, module: Any) -> bool:
        """Whether a module only holds others (a layer list)."""
        return False

    def is_training(self, module: Any) -> bool:
        """Whether a module is in training mode."""
        return bool(getattr(module, "training", False))

    def is_trainable(self, param: Any) -> bool:
        """Whether a parameter takes gradients."""
        return bool(getattr(param, "trainable", True))

    def held_value(self, value: Any) -> Any:
        """What the capture keeps for a parameter or input it declares (the value itself; a lazy
        framework may keep its own handle on the value's graph node)."""
        return value

    def declared(self, kind: str, name: str, value_id: int, value: Any, parents: Iterable[int] = ()) -> None:
        """Every value the recorder declares passes here, in order: ``kind`` is ``param``,
        ``input``, ``constant``, ``buffer`` or ``op`` (``name``: its address, input name or
        function). A backend keeping a structural signature of the capture listens here."""

    def unresolved_producer(self, value: Any) -> bool:
        """Whether a value the forward read from outside was made during the forward by a
        producer the capture could not see (a value that left the framework and came back, an
        op on another thread); none by default."""
        return False

    def outside_value(self, value: Any) -> Any:
        """What a constant or buffer from outside the forward keeps as its payload (the value
        itself where arrays are immutable; a framework whose arrays change in place copies)."""
        return value

    # ---- identity -------------------------------------------------------------------------------

    def known_id(self, value: Any) -> Optional[int]:
        """The value id of a value this capture has seen, or None."""
        return self.ids.get(id(value))

    def retag(self, value_id: int, value: Any) -> None:
        """Makes ``value`` carry ``value_id``."""
        self.ids[id(value)] = value_id
        self.alive.append(value)

    def tag(self, value: Any) -> int:
        """A new value id, carried by ``value``."""
        value_id = self.session.new_value_id()
        self.retag(value_id, value)
        return value_id

    def tag_lasting(self, value: Any) -> int:
        """Tags a value that outlives the capture (parameter, buffer, input)."""
        return self.tag(value)

    def id_of(self, value: Any) -> int:
        """The value id of a value an op reads, declaring it when the capture has not seen it:
        a layer buffer, or a constant from outside the forward."""
        value_id = self.known_id(value)
        if value_id is not None:
            return value_id
        deferred = self.deferred.pop(id(value), None)
        if deferred is not None:
            return self.param(*deferred)
        return self.declare_outside(value)

    def declare_outside(self, value: Any) -> int:
        """Declares a value the forward read from outside (a buffer or a constant)."""
        value_id = self.tag_lasting(value)
        with self.quiet():
            kept = self.outside_value(value)
        self.values[value_id] = kept
        shape, dtype = self.shape_of(value), self.dtype_of(value)
        address = self.buffer_addresses.get(id(value))
        if address is not None:
            self.session.buffer(address, value_id, kept, shape, dtype)
        else:
            self.session.constant(value_id, kept, shape, dtype)
        self.declared("buffer" if address is not None else "constant", address or "constant", value_id, value)
        if self.unresolved_producer(value):
            self.unresolved.add(value_id)
        return value_id

    def reference(self, value: Any) -> Tuple[int, ValueRef]:
        """``(value id, replay reference)`` of an op's array argument."""
        value_id = self.id_of(value)
        return value_id, ParamRef(value_id) if value_id in self.params else ValueRef(value_id)

    def adopt(self, value_id: int, value: Any) -> None:
        """``value`` replaces the value ``value_id`` (a live edit): it carries the id, is the
        value replay and the payload read, and is what flows downstream."""
        self.retag(value_id, value)
        self.values[value_id] = value
        if value_id in self.session.payloads:
            self.session.replace_payload(value_id, value)

    def quiet(self) -> contextlib.AbstractContextManager:
        """A block in which the wrappers pass through."""
        return _Quiet(self)

    def on_owner_thread(self) -> bool:
        """Whether the calling thread started the capture."""
        return threading.get_ident() == self.owner_thread

    def is_value(self, value: Any) -> bool:
        return isinstance(value, self.array_type)

    def value_facts(self, value: Any) -> Dict[str, Any]:
        """The value's shape and dtype (a framework that can read more without evaluating a
        lazy value says more)."""
        return {"shape": self.shape_of(value), "dtype": self.dtype_of(value)}

    def same_dtype(self, new: Any, like: Any) -> Any:
        """``new`` cast to ``like``'s dtype with the array's ``astype`` when they differ."""
        return new if new.dtype == like.dtype else new.astype(like.dtype)

    # ---- model structure --------------------------------------------------------------------------

    def declare_modules(self, root: Any) -> None:
        """Declares every module under a root module (shared ones once, with all their
        addresses), the parameters each owns and where its buffers live. The root is module 0,
        ``self``."""
        walk = ModuleWalk(root, self.module_children)
        walk.declare(self.session, self.is_container, self.is_training)
        self.module_ids.update(walk.module_ids)
        for module_id in range(len(walk.modules)):
            self.addresses[module_id] = walk.primary_address(module_id)
        for address, module_id, param in walk.owned(self.owned_params):
            self.param(address, module_id, param)
        for address, _module_id, buffer in walk.owned(self.owned_buffers):
            self.buffer_addresses[id(buffer)] = address
        self.walk = walk

    def declare_tree(self, tree: ModuleTree) -> None:
        """Declares the modules of a tree found by walking object attributes
        (:func:`~torchlens.adapter_kit.module_walk.discover_tree`): each once, with all its
        addresses, containers as containers. Its parameters are the caller's to declare."""
        for record in tree.modules:
            training = self.is_training(record.obj)
            self.session.module(
                record.module_id, record.addresses, record.class_name, record.container, training
            )
            self.module_ids[id(record.obj)] = record.module_id
            self.addresses[record.module_id] = record.addresses[0]

    def declare_root_function(self, function: Any) -> None:
        """Declares a function root: module 0, named after the function, owning nothing."""
        name = getattr(function, "__name__", type(function).__name__)
        self.session.module(0, ["self"], name, False, False)
        self.module_ids[id(function)] = 0

    def param(self, address: str, module_id: int, param: Any) -> int:
        """Declares one parameter."""
        value_id = self.tag_lasting(param)
        dtype = self.dtype_of(param)
        self.params[value_id] = self.held_value(param)
        self.param_dtypes[value_id] = dtype
        self.param_addresses[value_id] = address
        self.session.param(
            value_id, address, module_id, self.shape_of(param), dtype, self.is_trainable(param)
        )
        self.declared("param", address, value_id, param)
        return value_id

    def defer(self, address: str, module_id: int, param: Any) -> None:
        """Declares a parameter when an op first reads it, so a trace stopped early
        (``stop_after=``) accounts only for the parameters its ops used;
        :meth:`declare_remaining` declares the others after a complete forward."""
        self.deferred.setdefault(id(param), (address, module_id, param))

    def declare_remaining(self) -> None:
        """Declares the deferred parameters no op read."""
        for deferred in list(self.deferred.values()):
            self.param(*deferred)
        self.deferred.clear()

    def input(self, name: str, value: Any) -> int:
        """Declares one input of the call (an input passed twice is one value)."""
        known = self.known_id(value)
        if known is not None:
            return known
        value_id = self.tag_lasting(value)
        self.values[value_id] = held = self.held_value(value)
        self.session.input(name, value_id, held, self.shape_of(value), self.dtype_of(value))
        self.declared("input", name, value_id, held)
        return value_id

    def module_id(self, module: Any) -> int:
        """The module id of a module being called; one built during the forward (or not
        reachable from the root) is declared under its own address."""
        module_id = self.module_ids.get(id(module))
        if module_id is None:
            module_id = max(self.module_ids.values(), default=0) + 1
            self.module_ids[id(module)] = module_id
            self.alive.append(module)
            address = f"{type(module).__name__.lower()}_unregistered_{module_id}"
            self.addresses[module_id] = address
            self.session.module(module_id, [address], type(module).__name__, False, self.is_training(module))
        return module_id

    def module_stack(self) -> List[str]:
        """The module calls open now, ``address:call``, outermost first (the root excluded)."""
        return self.session.open_module_calls(self.addresses)

    # ---- module calls ---------------------------------------------------------------------------

    def module_call_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A module class's ``__call__`` reporting each outermost call on the owner thread."""
        recorder = self

        def call(module: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.depth or not recorder.on_owner_thread():
                return original(module, *args, **kwargs)
            return recorder.module_call(original, module, recorder.module_id(module), args, kwargs)

        return call

    def wrap_module_calls(self, patches: Any, skip: Callable[[Any], bool]) -> None:
        """Wraps ``__call__`` of the class of every walked module that defines it itself (each
        class once; a module ``skip`` takes is left out) with :meth:`module_call_wrapper`, for
        the capture (``patches`` restores them)."""
        classes = set()
        for _prefix, module in self.walk.modules if self.walk is not None else ():
            cls = type(module)
            if skip(module) or cls in classes or "__call__" not in vars(cls):
                continue
            classes.add(cls)
            patches.wrap(cls, "__call__", self.module_call_wrapper)

    def module_call(
        self, original: Callable[..., Any], module: Any, module_id: int, args: tuple, kwargs: dict
    ) -> Any:
        """One call of module ``module_id``, reported unless it runs inside a recorded op (also
        the ``on_call`` of :func:`~torchlens.adapter_kit.module_walk.install_module_calls`)."""
        if self.depth:
            return original(module, *args, **kwargs)
        self.session.enter(module_id)
        return self.exit(module_id, original(module, *args, **kwargs))

    def exit(self, module_id: int, output: Any) -> Any:
        """A module call returns ``output``; returns what its caller sees (a ``tl.module`` edit
        may replace outputs)."""
        known = [
            (value_id, value)
            for value in self.arrays_of(output)
            if (value_id := self.known_id(value)) is not None
        ]
        ids = [value_id for value_id, _ in known]
        values = [value for _, value in known]
        self.session.exit(module_id, ids, values)
        if self.on_exit is None:
            return output
        replaced = self.on_exit(module_id, ids, values)
        if not replaced:
            return output
        by_object = {id(value): replaced[value_id] for value_id, value in known if value_id in replaced}
        return substitute(output, by_object)

    # ---- op interception -------------------------------------------------------------------------

    def record(self, func: str, call: Callable[..., Any], args: tuple, kwargs: dict, out: Any) -> Any:
        """Records one op call that returned ``out``; returns what the caller sees (a live edit
        may replace outputs). The default records the outputs :meth:`results_of` names, the
        array arguments (top level, or in a list or tuple) as parents; a call that returned
        none is no op."""
        results = self.results_of(out)
        if not results:
            return out
        parents, template, keywords = argument_template(args, kwargs, self.array_type, self.reference)
        return self.edited_outputs(
            func, out, self.report_op(func, call, parents, template, keywords, results)
        )

    def results_of(self, out: Any) -> List[Tuple[Optional[int], Any]]:
        """``(output index, array)`` of what a call returned: one array (index None), or a
        non-empty list or tuple of arrays (each at its index); anything else holds none."""
        if isinstance(out, self.array_type):
            return [(None, out)]
        if isinstance(out, (list, tuple)) and out and all(isinstance(item, self.array_type) for item in out):
            return list(enumerate(out))
        return []

    def report_op(
        self,
        func: str,
        call: Optional[Callable[..., Any]],
        parents: List[Tuple[int, int]],
        template: tuple,
        keywords: Any,
        results: Iterable[Tuple[Optional[int], Any]],
        opaque: bool = False,
        attributes: Sequence[Tuple[str, str]] = (),
        keep: bool = True,
    ) -> List[OutputFact]:
        """Reports one op whose parents and replay templates ``argument_template`` made: each
        ``(output index, value)`` of ``results`` gets a new id and is held with its replay
        record. ``attributes`` and ``keep`` are :meth:`CaptureSession.op`'s. Returns the
        outputs' facts (what :meth:`edited_outputs` takes)."""
        outputs: List[OutputFact] = []
        for output_index, value in results:
            value_id = self.tag(value)
            self.values[value_id] = value
            self.records[value_id] = ReplayRecord(call, func, template, keywords, output_index, opaque)
            outputs.append((value_id, value, self.shape_of(value), self.dtype_of(value)))
        self.session.op(func, parents, outputs, attributes=attributes, keep=keep)
        for value_id, value, _shape, _dtype in outputs:
            self.declared("op", func, value_id, value, [parent for parent, _ in parents])
        return outputs

    def op_wrapper(
        self, func: str, ceiling: Optional[str] = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A wrapper maker recording each outermost call of a framework function as op ``func``
        (calls inside it pass through). A ``ceiling`` is noted when the forward makes the call
        (a call whose inside the capture cannot see)."""
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if recorder.depth:
                    return original(*args, **kwargs)
                if ceiling is not None:
                    recorder.ceilings[ceiling] = None
                recorder.depth += 1
                try:
                    out = original(*args, **kwargs)
                finally:
                    recorder.depth -= 1
                return recorder.record(func, original, args, kwargs, out)

            return wrapped

        return make

    def in_place_wrapper(
        self, func: str, replay: Optional[Callable[..., Any]] = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A wrapper maker recording an in-place call, whose first argument gets a new value, as
        op ``func``: the op's parents are read before the call, the old value is kept as a
        :meth:`copy` (its payload stays what it was) and the object is known by its new value.
        Replay runs ``replay`` (a version that leaves its argument alone), else the call."""
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(target: Any, *args: Any, **kwargs: Any) -> Any:
                if recorder.depth:
                    return original(target, *args, **kwargs)
                with recorder.quiet():
                    before = target
                    old_id = recorder.known_id(target)
                    if old_id is not None:
                        recorder.session.retire(old_id)
                        before = recorder.copy(target)
                        recorder.adopt(old_id, before)
                    parents, template, keywords = argument_template(
                        (before, *args), kwargs, recorder.array_type, recorder.reference
                    )
                    result = original(target, *args, **kwargs)
                    produced = target if result is None else result
                    recorder.report_op(
                        func, replay or original, parents, template, keywords, [(None, produced)]
                    )
                return result

            return wrapped

        return make

    def refusing_wrapper(
        self, error: Callable[[], Exception]
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A wrapper maker refusing a call the forward makes (``error()`` is raised), while the
        capture's own calls pass through."""
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def refused(*args: Any, **kwargs: Any) -> Any:
                if recorder.depth:
                    return original(*args, **kwargs)
                raise error()

            return refused

        return make

    def observed(self, record: Callable[..., None], *args: Any) -> None:
        """Runs ``record(*args)`` for one op an observing interception reports (a callback the
        framework calls after the op ran): the outermost op of the owner thread only (the
        capture's own calls pass through). An error ``record`` raises is kept as ``error``,
        because the framework may re-raise it as another type, and raised."""
        if self.depth or not self.on_owner_thread():
            return
        self.depth += 1
        try:
            record(*args)
        except BaseException as error:
            self.error = error
            raise
        finally:
            self.depth -= 1

    def quiet_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A wrapper whose call, and everything inside it, is not recorded."""
        recorder = self

        def quiet(*args: Any, **kwargs: Any) -> Any:
            recorder.depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                recorder.depth -= 1

        return quiet

    # ---- op outputs -----------------------------------------------------------------------------

    def edited_outputs(self, func: str, out: Any, outputs: Iterable[OutputFact]) -> Any:
        """What the caller of a recorded op sees: ``out``, with any output a live edit replaced
        substituted in."""
        if self.on_output is None:
            return out
        replaced: Dict[int, Any] = {}
        for value_id, value, _shape, _dtype in outputs:
            new = self.on_output(func, value_id, value)
            if new is not value:
                replaced[id(value)] = new
        if not replaced:
            return out
        return substitute(out, replaced)


class _Quiet:
    __slots__ = ("recorder",)

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def __enter__(self) -> None:
        self.recorder.depth += 1

    def __exit__(self, *exc: Any) -> None:
        self.recorder.depth -= 1
