"""Live ``intervene=`` on eager TensorFlow through a writable wrap layer over the callback
capture. TensorFlow's op callbacks are read-only (a returned replacement is ignored in eager
mode), so values are replaced where Python still holds them:

* ``tl.module`` / ``tl.in_module`` rules: at the Keras layer's or ``tf.Module``'s call boundary
  (the wrapped ``__call__`` returns the replacement);
* ``tl.func`` / ``tl.label`` / ``tl.label_contains`` rules: at the return of a curated registry
  of ``tf.nn`` and ``tf.math`` entry points (``REGISTRY``), wrapped for the capture.

A rule that matches an op whose call never passed through the wrap layer (a ``gen_*_ops`` or C++
path, an op inside a composite entry point) raises ``tf_intervene_unreachable`` rather than
silently not intervening. ``stop_after=`` is not served (nothing here can end the forward where a
value appears); value-dependent conditions and look-back selectors refuse before the model runs
(gradient sites and ``intervene=`` with ``grad_options=`` refuse in the kit's preflight)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import tensorflow as tf

from torchlens.adapter_kit.live_edits import selector_kinds
from torchlens.adapter_kit.replay import replay_edits
from torchlens.edits.actions import Add, CallableAction, Scale, ZeroAblate, _shape_kept

from . import refusals

#: The wrapped entry points: ``(module path, attribute)``; Keras' TensorFlow backend calls these
#: (``keras.activations.relu`` ends in ``tf.nn.relu``).
REGISTRY = tuple(
    [
        ("nn", name)
        for name in (
            "relu",
            "relu6",
            "elu",
            "selu",
            "gelu",
            "sigmoid",
            "tanh",
            "softmax",
            "log_softmax",
            "softplus",
            "silu",
            "leaky_relu",
            "bias_add",
        )
    ]
    + [("math", name) for name in ("tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "abs", "square")]
)

#: Actions with a native TensorFlow implementation (plus raw callables on ``tf.Tensor``).
_NATIVE_ACTIONS = (ZeroAblate, Scale, Add, CallableAction)


def apply_natively(adapter: Any, action: Any, value: Any) -> Any:
    """The replacement of ``value`` under ``action``, as a tensor of the same shape and dtype."""
    if isinstance(action, ZeroAblate):
        result = tf.zeros_like(value)
    elif isinstance(action, Scale):
        result = tf.cast(value * tf.cast(action.factor, value.dtype), value.dtype)
    elif isinstance(action, Add):
        delta = action.delta
        if not isinstance(delta, tf.Tensor):
            delta = tf.constant(delta, dtype=value.dtype)
        result = tf.cast(value + tf.cast(delta, value.dtype), value.dtype)
    else:  # a raw callable on the framework's tensor, or a helper computed on a host copy
        return action.apply(value, adapter)
    _shape_kept(action.describe(), value, result)
    return result


class LiveEdits:
    """``intervene=`` on a TensorFlow capture. Every request is checked before the model runs."""

    def __init__(self, request: Any, adapter: Any) -> None:
        self.adapter = adapter
        self.request = request
        if request.stop_after is not None:
            raise refusals.refuse(
                "stop_after= needs a point where the forward can end as a value appears; "
                "TensorFlow's op callbacks are read-only",
                "stop_after_unsupported",
                "trace the whole forward and select what you need with save=",
            )
        self.conditions: List[Any] = []
        for rule in request.interventions:
            if not isinstance(rule.action, _NATIVE_ACTIONS):
                raise refusals.refuse(
                    f"the {rule.action.describe()} helper has no TensorFlow implementation",
                    "edit_action_unsupported",
                    "use tl.zero_ablate, tl.scale, tl.add or a callable on tf.Tensor",
                )
            kinds = selector_kinds(rule.condition)
            if "where" in kinds:
                raise refusals.refuse(
                    "value-dependent conditions (tl.where) are not served on TensorFlow: the "
                    "callback capture decides rules from static selectors only",
                    "value_dependent_predicate",
                    "use static selectors (tl.func, tl.label, tl.module, tl.in_module)",
                )
            if "temporal" in kinds:
                raise refusals.refuse(
                    "intervene= with tl.followed_by / tl.preceded_by needs a look-back window",
                    "followed_by_unsupported",
                    "select the op itself (tl.func, tl.label, tl.module)",
                )
            at_exit = "module" in kinds
            if at_exit and kinds - {"module"}:
                raise refusals.refuse(
                    "intervene= mixes tl.module(...) with another selector kind; a module term is "
                    "decided at the call's exit, the others at the op",
                    "mixed_module_selector",
                    "use tl.module terms alone (a union of them works), or tl.in_module(...) with the others",
                )
            self.conditions.append((rule, at_exit))
        self.session: Any = None
        self.recorder: Any = None
        self.rules: List[Any] = []
        #: Value id → (the actions, the value before the edit): what replay checks.
        self.fired: Dict[int, Any] = {}
        self._fired_at_exit: set = set()
        #: Value ids matched by an op-level rule inside a wrapped entry point, not yet fired.
        self.pending: set = set()

    def attach(self, session: Any, recorder: Any, patches: Any) -> None:
        """Compiles the rules against the declared modules, hooks the recorder and wraps the
        registry's entry points."""
        self.session, self.recorder = session, recorder
        for rule, at_exit in self.conditions:
            self.rules.append((rule, at_exit, session.rule(rule.condition)))
        recorder.on_op = self.on_op
        recorder.on_exit = self.on_exit
        if any(not at_exit for _rule, at_exit, _live in self.rules):
            for module_name, name in REGISTRY:
                owner = getattr(tf, module_name)
                if getattr(owner, name, None) is not None:
                    patches.wrap(owner, name, self._entry_wrapper)

    # ---- at the op --------------------------------------------------------------------------------

    def on_op(self, func: str, value_id: int) -> None:
        """An op was recorded: a matching op-level rule must be served by a wrapped entry point."""
        for _rule, at_exit, live in self.rules:
            if at_exit or not live.at_op(func, value_id):
                continue
            if not self.recorder.wrap_depth:
                raise refusals.refuse(
                    f"an intervene= rule matches {func} (a TensorFlow op whose call did not pass "
                    "through the wrap layer), so it cannot be replaced",
                    "tf_intervene_unreachable",
                    "select a module output (tl.module / tl.in_module) or an op reached through "
                    f"tf.nn / tf.math ({', '.join(sorted({name for _m, name in REGISTRY}))})",
                )
            self.pending.add(value_id)

    def _entry_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        edits = self
        recorder = self.recorder

        def entry(*args: Any, **kwargs: Any) -> Any:
            if recorder.depth or not recorder.on_owner_thread():
                return original(*args, **kwargs)
            before = set(edits.pending)
            recorder.wrap_depth += 1
            try:
                out = original(*args, **kwargs)
            finally:
                recorder.wrap_depth -= 1
            value_id = recorder.known_id(out) if isinstance(out, tf.Tensor) else None
            inner = edits.pending - before
            if value_id is not None and value_id in inner:
                inner.discard(value_id)
                edits.pending.discard(value_id)
                out = edits._fire_op(value_id, out)
            if inner and not recorder.wrap_depth:
                recorder.error = refusals.refuse(
                    "an intervene= rule matches an op inside a wrapped entry point that is not "
                    "its result, so it cannot be replaced",
                    "tf_intervene_unreachable",
                    "select the entry point's result (its function name) or a module output",
                )
                raise recorder.error
            return out

        return entry

    def _fire_op(self, value_id: int, value: Any) -> Any:
        current = value
        func = None
        for rule, at_exit, live in self.rules:
            if at_exit:
                continue
            if func is None:
                func = self.recorder.funcs.get(value_id, "")
            if live.at_op(func, value_id):
                current = self._fire(rule, value_id, current)
        return current

    def on_exit(self, module_id: int, value_ids: list, values: list) -> dict:
        """A module call returned: ``tl.module`` rules fire once here. Returns replacements by
        value id."""
        replaced: dict = {}
        by_id = dict(zip(value_ids, values))
        for index, (rule, at_exit, live) in enumerate(self.rules):
            if not at_exit:
                continue
            for value_id in live.at_exit(value_ids):
                if (index, value_id) in self._fired_at_exit:
                    continue
                self._fired_at_exit.add((index, value_id))
                replaced[value_id] = self._fire(rule, value_id, replaced.get(value_id, by_id[value_id]))
        return replaced

    def _fire(self, rule: Any, value_id: int, value: Any) -> Any:
        recorder = self.recorder
        recorder.depth += 1
        try:
            new = self.adapter.apply_action(rule.action, value)
            if not isinstance(new, tf.Tensor):
                new = tf.convert_to_tensor(new)
            _shape_kept(rule.action.describe(), value, new)
            if new.dtype != value.dtype:
                new = tf.cast(new, value.dtype)
            if new is value:
                new = tf.identity(value)
        except Exception as error:
            # Raised inside a layer's call, which Keras may re-raise as another type: the
            # adapter re-raises this one.
            recorder.error = error
            raise
        finally:
            recorder.depth -= 1
        recorder.adopt(value_id, new)
        previous = self.fired.get(value_id)
        original = previous[1] if previous is not None else value
        actions = (previous[0] if previous is not None else ()) + (rule.action,)
        self.fired[value_id] = (actions, original)
        self.session.edit(value_id, rule.describe(), rule.action.describe(), "post")
        return new

    # ---- after the forward --------------------------------------------------------------------------

    def prepare_runtime(self, runtime: Any) -> None:
        """Replay of an edited op re-applies its declared actions (the kit's ``replay_edits``)."""
        replay_edits(runtime, self.fired, self.adapter, apply_natively, _output_of)


def _output_of(result: Any, output_index: Any) -> Any:
    return list(result)[output_index or 0] if isinstance(result, (list, tuple)) else result
