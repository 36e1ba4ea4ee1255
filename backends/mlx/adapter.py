"""The MLX adapter: the backend protocol for MLX."""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from torchlens.adapter_kit import BackendProtocol, CaptureRequest, SaveRequest
from torchlens.adapter_kit.capture_pipeline import CallRuntime, CaptureHooks
from torchlens.adapter_kit.host_conversions import HostConversions
from torchlens.adapter_kit.module_walk import install_module_calls
from torchlens.adapter_kit.replay import ReplayRecord, values_match
from torchlens.adapter_kit.structures import named_arrays, substitute
from torchlens.edits import actions
from torchlens.errors import UnsupportedError

from . import refusals
from .capture import Recorder, Stop, rebind_held_functions, rebuild, result_arrays
from .dtypes import mlx_dtype, neutral_name
from .grads import GradHooks, GradOptions
from .modules import ModuleTree, discover


@dataclass
class MlxRuntime(CallRuntime):
    """Runtime-only data of a live trace: the kit's, plus what derived gradients read again."""

    tree: Any = None
    input_ids: Any = None
    mode: str = "function_root"
    #: The capture's structural signature and value ids in order (derived gradients).
    order: List[Any] = field(default_factory=list)
    order_ids: List[int] = field(default_factory=list)


def selector_kinds(selector: Any) -> set:
    """The node kinds of a selector (``func``, ``module``, ``and``, ``where`` ...)."""
    nodes, _ = selector.arena()
    return {node[0] for node in nodes}


_LEAF_KINDS = ("func", "label", "label_contains", "in_module")


def check_rule_selector(selector: Any, what: str) -> None:
    """Refuses selectors MLX cannot decide live, before the forward runs."""
    kinds = selector_kinds(selector)
    for kind, code, shown in refusals._REFUSED_KINDS:
        if kind in kinds:
            raise refusals.refuse(
                f"{shown} cannot be decided live on MLX ({what})",
                code,
                "use a static selector: tl.func, tl.label, tl.label_contains, tl.in_module or tl.module",
            )
    if "module" in kinds and any(kind in kinds for kind in _LEAF_KINDS):
        raise refusals.refuse(
            f"{what} mixes tl.module(...) with another selector kind; a module term fires at the "
            "call's exit, the others at the op",
            "mixed_module_selector",
            "use a union of tl.module terms, or split the rule into two tl.when rules",
        )


class Declarations:
    """The edits a finished trace declares, by value id (read once, at replay time)."""

    def __init__(self) -> None:
        #: The trace, weakly: these declarations are reached from the trace's own replay
        #: records, and a strong reference back would keep a dropped trace for the cyclic
        #: collector. Replay runs only through a live trace.
        self.trace: Optional[weakref.ref] = None
        self._by_value: Optional[Dict[int, List[Tuple[str, str]]]] = None

    def of(self, value_id: int) -> List[Tuple[str, str]]:
        if self._by_value is None:
            self._by_value = {}
            trace = self.trace() if self.trace is not None else None
            if trace is not None:
                for op in trace.ops:
                    edits = op._info.get("edits") or []
                    if edits:
                        self._by_value[op._info.get("value")] = [(rule, action) for rule, action, _ in edits]
        return self._by_value.get(value_id, [])


class EditedCall:
    """Replay of a recorded op that checks the trace's edit declaration: the recorded producer,
    then the edits the capture applied, re-applied only when the trace declares exactly those
    edits on the op. A stripped or forged declaration (an edit declared that did not run, or
    one that ran and is not declared) fails the op's replay.

    The edits are re-applied to a producer output equal to the recorded pre-hook value (the op's
    own parents); a perturbed parent yields the producer's moved output as it is, so the
    perturbation check shows the producer depends on its parents even when the edit's
    replacement does not (``zero_ablate``, ``replace_with``)."""

    __slots__ = ("call", "value_id", "edits", "adapter", "pre_value", "index", "declarations")

    def __init__(
        self,
        call: Any,
        value_id: int,
        edits: List[Tuple[str, str, Any]],
        adapter: Any,
        pre_value: Any,
        index: Any,
        declarations: Declarations,
    ) -> None:
        self.call, self.value_id, self.edits, self.adapter = call, value_id, list(edits), adapter
        self.pre_value, self.index, self.declarations = pre_value, index, declarations

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.declarations.of(self.value_id) != [(rule, described) for rule, described, _ in self.edits]:
            raise ValueError("the edits the trace declares on this op are not the ones the capture applied")
        result = self.call(*args, **kwargs)
        if not self.edits:
            return result

        produced = result if self.index is None else result[self.index]
        if not isinstance(produced, mx.array):
            return result
        if not values_match(self.adapter, produced, self.pre_value, neutral_name(produced.dtype)):
            return result
        edited = produced
        for _, _, action in self.edits:
            edited = self.adapter.apply_action(action, edited)
        if self.index is None:
            return edited
        items = list(result)
        items[self.index] = edited
        return items


class MlxCapture(CaptureHooks):
    """The MLX side of the kit's capture pipeline: wrapped ``mx`` functions, array methods and
    module calls, live edits at the wrapper boundary, evaluated once."""

    runtime_type = MlxRuntime
    stop_signal = Stop

    def check(self) -> None:
        request = self.request
        if request.options.extra.get("backward_ready"):
            raise refusals.refuse(
                "backward_ready=True needs true backward capture",
                "capability_unsupported",
                "use tl.backends.mlx.GradOptions for derived gradients, or the torch backend",
            )
        for intervention in request.interventions:
            check_rule_selector(intervention.condition, "intervene=")
        if request.stop_after is not None:
            check_rule_selector(request.stop_after.selector, "stop_after=")
        refusals.check_root(self.model)
        self.stopped: Optional[List[int]] = None
        self.input_ids: List[int] = []

    def make_recorder(self) -> Recorder:
        on_unwrapped = self.request.options.extra.get(refusals.ON_UNWRAPPED, "warn")
        return Recorder(self.session, on_unwrapped=on_unwrapped)

    def declare_modules(self) -> None:
        model, mode, session, recorder = self.model, self.mode, self.session, self.recorder
        tree = discover(model) if mode == "object_module" else ModuleTree()
        if mode == "function_root" and self.adapter.is_module_root(model):
            # The root-only surface: no submodules, every parameter belongs to the root.
            walked = discover(model)
            tree.params = [(address, 0, array, trainable) for address, _, array, trainable in walked.params]
            tree.modules = [walked.modules[0]]
            tree.by_object = {id(model): 0}
        self.tree = tree
        if mode == "object_module":
            name, training = type(model).__name__, bool(getattr(model, "training", False))
        else:
            name, training = getattr(model, "__name__", type(model).__name__), False
        session.module(0, ["self"], name, False, training)
        for record in tree.modules[1:]:
            session.module(
                record.module_id,
                record.addresses,
                record.class_name,
                record.container,
                bool(getattr(record.obj, "training", False)),
            )
        recorder.defer_params(tree.params)
        recorder.scan_outside([model] + [record.obj for record in tree.modules[1:] if not record.container])

    def declare_input(self, name: str, value: Any) -> None:
        self.input_ids.append(self.recorder.input(name, value))

    def install(self) -> None:
        patches, recorder, tree = self.patches, self.recorder, self.tree
        self.live = live = _LiveEdits(self.adapter, self.session, recorder, self.request)
        recorder.install(patches)
        rebind_held_functions(
            patches, [record.obj for record in tree.modules if not record.container], recorder.wrapped
        )
        install_module_calls(patches, tree, live.module_call)
        transformed = refusals.gc_func_type()
        for owner, name in _compiled_attributes(tree) + recorder.global_transforms:
            # MLX's own compiled helpers are wrapped by name already (nn.gelu is an op).
            if isinstance(getattr(owner, name), transformed):
                patches.replace(owner, name, live.compiled_attribute(getattr(owner, name), name))
        if live.active:
            recorder.on_op = live.at_op

    def exit_root(self, output: Any) -> Any:
        recorder = self.recorder
        self.outputs = [
            (name, recorder.value_id_of(array)) for name, array in self.adapter.output_pairs(output)
        ]
        recorder.declare_remaining()
        ids = [value_id for _, value_id in self.outputs]
        self.session.exit(0, ids, [recorder.values.get(value_id) for value_id in ids])
        return output

    def declare_outputs(self, output: Any) -> None:
        for name, value_id in self.outputs:
            self.session.output(name, value_id)

    def finish_stopped(self, edits: Any, signal: BaseException) -> None:
        self.stopped = signal.frontier  # type: ignore[attr-defined]
        self.session.exit(0, [])
        self.session.mark_stopped("stop_after", self.stopped)

    def ceilings(self) -> List[str]:
        found = []
        if self.recorder.unwrapped:
            found.append("unwrapped_op_in_capture")
        if self.live.compiled_called or self.recorder.transformed_called:
            found.append("mlx_compiled_attribute_not_logged")
        return found

    def realize_all(self) -> None:
        self.recorder.realize_all(mx.eval)
        self.declarations = _edited_records(self.adapter, self.recorder)

    def reference(self) -> Any:
        """The outputs replay compares with: the model with nothing installed, or, for an
        edited run, the model run again with the same edits applied and nothing recorded."""
        if self.stopped is not None:
            return lambda: []
        if not self.recorder.edits:
            return super().reference()
        adapter, request = self.adapter, self.request

        def rerun() -> List[Any]:
            # A fresh forward with the same edits (its own capture), independent of this one.
            again = adapter.capture(dataclasses.replace(request, save=SaveRequest()))
            return [op.out for op in again.outputs]

        return rerun

    def runtime_fields(self) -> Dict[str, Any]:
        recorder = self.recorder
        return {
            "tree": self.tree,
            "input_ids": self.input_ids,
            "mode": self.mode,
            # The kit's form (actions, pre-edit value): what validation holds to the trace's edit
            # records; replay itself re-applies through EditedCall.
            "edits": {
                value_id: (tuple(action for _, _, action in fired), None)
                for value_id, fired in recorder.edits.items()
            },
            "order": recorder.order,
            "order_ids": recorder.order_ids,
        }

    def finished(self, trace: Any) -> None:
        self.declarations.trace = weakref.ref(trace)


def _edited_records(adapter: Any, recorder: Recorder) -> Declarations:
    """Every replay record checks the trace's edit declaration when it runs; edited ones
    re-apply their edits."""
    declarations = Declarations()
    edits = recorder.edits
    for value_id, record in recorder.records.items():
        if record.call is None:
            continue
        applied = edits.get(value_id, [])
        pre_value = recorder.pre_values.get(value_id)
        record.call = EditedCall(
            record.call, value_id, applied, adapter, pre_value, record.output_index, declarations
        )
    return declarations


class MlxAdapter(HostConversions, BackendProtocol):
    """Fills the backend protocol for MLX."""

    array_type = mx.array
    grad_options_type = GradOptions
    grad_hooks_type = GradHooks
    capture_hooks = MlxCapture
    module_root_description = "an mlx.nn.Module root"

    def is_module_root(self, model: Any) -> bool:
        return isinstance(model, nn.Module)

    def differentiable_input(self, value: Any) -> bool:
        return isinstance(value, mx.array) and mx.issubdtype(value.dtype, mx.inexact)

    def reference_output(self, model: Any, args: tuple, kwargs: dict) -> Any:
        output = model(*args, **kwargs)
        mx.eval([array for _, array in self.output_pairs(output)])
        return output

    def output_leaves(self, output: Any) -> List[Any]:
        return [array for _, array in self.output_pairs(output)]

    def realize(self, values: List[Any]) -> List[Any]:
        """Evaluates lazy arrays in one ``mx.eval``."""
        arrays = [value for value in values if isinstance(value, mx.array)]
        if arrays:
            mx.eval(arrays)
        return values

    # ---- host copies (the kit's HostConversions over these) -------------------------------------

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype) if isinstance(value, mx.array) else np.asarray(value).dtype.name

    def array_to_host(self, value: Any) -> np.ndarray:
        return np.array(value)

    def array_from_host(self, array: np.ndarray) -> Any:
        return mx.array(array)

    def cast(self, value: Any, dtype: str) -> Any:
        return value.astype(mlx_dtype(dtype))

    def reinterpret(self, value: Any, dtype: str) -> Any:
        return value.view(mlx_dtype(dtype))

    # ---- edits ----------------------------------------------------------------------------------

    def apply_action(self, action: Any, value: Any) -> Any:
        """Applies an edit action with MLX's own lazy ops (nothing is evaluated mid-forward,
        so realize-once holds); the result keeps the value's shape and dtype."""
        if isinstance(action, actions.CallableAction):
            result = action.apply(value, self)
        elif isinstance(action, actions.ZeroAblate):
            result = mx.zeros_like(value)
        elif isinstance(action, actions.Scale):
            result = value * action.factor
        elif isinstance(action, actions.Add):
            result = value + _as_mlx(action.delta)
        elif isinstance(action, actions.Clamp):
            result = mx.clip(value, action.min, action.max)
        elif isinstance(action, actions.MeanAblate):
            if action.source is not None:
                result = mx.full(value.shape, _as_mlx(action.source).astype(mx.float32).mean())
            elif action.dim is None:
                result = mx.full(value.shape, value.astype(mx.float32).mean())
            else:
                result = mx.broadcast_to(
                    value.astype(mx.float32).mean(axis=action.dim, keepdims=True), value.shape
                )
        elif isinstance(action, actions.ReplaceWith):
            replacement = action.value() if callable(action.value) else action.value
            replacement = _as_mlx(replacement)
            try:
                result = mx.broadcast_to(replacement, value.shape)
            except ValueError:
                result = replacement  # the shape check below refuses it
        else:
            result = action.apply(value, self)
        if not isinstance(result, mx.array):
            result = _as_mlx(result)
        if tuple(result.shape) != tuple(value.shape):
            raise UnsupportedError(
                f"{action.describe()} would change the shape from {tuple(value.shape)} to "
                f"{tuple(result.shape)}",
                "edit_shape_changed",
                "make the replacement the same shape as the value it replaces",
            )
        if result.dtype != value.dtype:
            result = result.astype(value.dtype)
        return result

    # ---- replay hooks -----------------------------------------------------------------------------

    def run_op(self, record: ReplayRecord, args: tuple, kwargs: dict) -> Any:
        result = record.call(*args, **kwargs)
        if record.output_index is not None:
            result = result[record.output_index]
        return result


def _as_mlx(value: Any) -> Any:
    """An ``mx.array`` of a number, a NumPy array or an ``mx.array``."""
    if isinstance(value, mx.array):
        return value
    return mx.array(np.asarray(value))


def _compiled_attributes(tree: ModuleTree) -> List[Tuple[Any, str]]:
    """``(module, attribute)`` of every compiled function held by a module of the tree (or the
    root function's object): its body runs where no wrapper sees it."""
    gc_func = refusals.gc_func_type()
    found = []
    objects = [record.obj for record in tree.modules if not record.container] or []
    for obj in objects:
        try:
            attributes = vars(obj)
        except TypeError:
            continue
        for name, value in attributes.items():
            if isinstance(value, gc_func):
                found.append((obj, name))
    return found


class _LiveEdits:
    """``intervene=`` and ``stop_after=`` at the wrapper boundary, and module call reporting."""

    def __init__(
        self, adapter: MlxAdapter, session: Any, recorder: Recorder, request: CaptureRequest
    ) -> None:
        self.adapter, self.session, self.recorder = adapter, session, recorder
        self.interventions = list(request.interventions)
        self.stop = request.stop_after
        self.rules: List[Tuple[Any, Any]] = []
        self.stop_rule: Any = None
        self.active = bool(self.interventions) or self.stop is not None
        self.compiled_called = False
        self._prepared = False

    def _prepare(self) -> None:
        if self._prepared:
            return
        self._prepared = True
        self.rules = [(self.session.rule(item.condition), item) for item in self.interventions]
        if self.stop is not None:
            self.stop_rule = self.session.rule(self.stop.selector)

    def _edit(self, value_id: int, array: Any, intervention: Any) -> Any:
        action = intervention.action
        recorder = self.recorder
        recorder.quiet += 1  # hook internals are not graph ops
        try:
            replacement = self.adapter.apply_action(action, array)
        finally:
            recorder.quiet -= 1
        if tuple(replacement.shape) != tuple(array.shape):
            raise UnsupportedError(
                f"{action.describe()} changed the shape", "edit_shape_changed", "keep the value's shape"
            )
        if replacement.dtype != array.dtype:
            replacement = replacement.astype(array.dtype)
        session = self.session
        rule = intervention.describe()
        recorder.pre_values.setdefault(value_id, array)
        session.edit(value_id, rule, action.describe(), "post")
        session.replace_payload(value_id, replacement)
        recorder.values[value_id] = replacement
        recorder.known[id(replacement)] = value_id
        recorder.edits.setdefault(value_id, []).append((rule, action.describe(), action))
        return replacement

    def at_op(self, func: str, ids: List[int], result: Any) -> Any:
        self._prepare()
        arrays = result_arrays(result)
        changed = False
        for index, value_id in enumerate(ids):
            for rule, intervention in self.rules:
                if rule.at_op(func, value_id):
                    arrays[index] = self._edit(value_id, arrays[index], intervention)
                    changed = True
        if changed:
            result = rebuild(result, arrays)
        if self.stop_rule is not None:
            hits = [value_id for value_id in ids if self.stop_rule.at_op(func, value_id)]
            if hits:
                raise Stop(hits)
        return result

    def module_call(self, original: Any, module: Any, module_id: int, args: tuple, kwargs: dict) -> Any:
        session, recorder = self.session, self.recorder
        session.enter(module_id)
        try:
            output = original(module, *args, **kwargs)
        except Stop:
            session.exit(module_id, [])
            raise
        arrays = [array for _, array in named_arrays(output, mx.array)]
        ids = [recorder.value_id_of(array) for array in arrays]
        session.exit(module_id, ids, arrays)
        if not self.active:
            return output
        self._prepare()
        replacements: Dict[int, Any] = {}
        by_id = dict(zip(ids, arrays))
        for rule, intervention in self.rules:
            if rule.waits_for_exits:
                for value_id in rule.at_exit(ids):
                    array = by_id[value_id]
                    new = self._edit(value_id, array, intervention)
                    replacements[id(array)] = new
                    by_id[value_id] = new
        if replacements:
            output = substitute(output, replacements)
        if self.stop_rule is not None and self.stop_rule.waits_for_exits:
            hits = self.stop_rule.at_exit(ids)
            if hits:
                raise Stop(hits)
        return output

    def compiled_attribute(self, function: Any, name: str) -> Any:
        """A compiled function held by the model: its body runs outside the wrappers, so its
        outputs are recorded as one opaque op and the capture is ceilinged."""
        live = self

        def call(*args: Any, **kwargs: Any) -> Any:
            recorder = live.recorder
            if recorder.quiet:
                return function(*args, **kwargs)
            live.compiled_called = True
            recorder.quiet += 1
            try:
                result = function(*args, **kwargs)
            finally:
                recorder.quiet -= 1
            return recorder.record(name, function, args, kwargs, result)

        return call
