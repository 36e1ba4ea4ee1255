"""Live edits on Paddle: edit actions applied natively on ``paddle.Tensor``, and the
``intervene=`` / ``stop_after=`` rules decided as each concrete output leaves its wrapper."""

from __future__ import annotations

from typing import Any

import paddle

from torchlens.edits.actions import Add, CallableAction, ReplaceWith, Scale, ZeroAblate, _shape_kept


class StopSignal(BaseException):
    """Raised inside the forward at the ``stop_after=`` frontier, so nothing past it runs."""


def apply_natively(adapter: Any, action: Any, value: Any) -> Any:
    """The replacement of ``value`` under ``action``, as a tensor of the same shape and dtype."""
    if isinstance(action, ZeroAblate):
        result = paddle.zeros_like(value)
    elif isinstance(action, Scale):
        result = (value * action.factor).astype(value.dtype)
    elif isinstance(action, Add):
        delta = action.delta
        if not isinstance(delta, (int, float, paddle.Tensor)):
            delta = adapter.from_numpy(
                _numpy(delta, adapter.to_numpy(value).dtype), adapter.neutral_dtype(value)
            )
        result = (value + delta).astype(value.dtype)
    elif isinstance(action, ReplaceWith):
        replacement = action.value() if callable(action.value) else action.value
        if not isinstance(replacement, paddle.Tensor):
            array = _numpy(replacement, adapter.to_numpy(value).dtype)
            replacement = adapter.from_numpy(array, str(array.dtype))
        result = paddle.broadcast_to(replacement, value.shape).astype(value.dtype)
    elif isinstance(action, CallableAction):
        return action.apply(value, adapter)
    else:
        return action.apply(value, adapter)
    _shape_kept(action.describe(), value, result)
    return result


def _numpy(value: Any, dtype: Any) -> Any:
    import numpy

    return numpy.ascontiguousarray(numpy.asarray(value, dtype=dtype))


# ---- live edits and early stop -------------------------------------------------------------------

#: Actions with a native Paddle implementation (plus raw callables on ``paddle.Tensor``).
_NATIVE_ACTIONS = (ZeroAblate, Scale, Add, ReplaceWith, CallableAction)


def _selector_kinds(selector: Any, found: set) -> set:
    """The leaf kinds of a selector tree (``func``, ``module``, ``where``, ...)."""
    from torchlens import selectors

    if isinstance(selector, selectors._Leaf):
        found.add(selector.kind)
    elif isinstance(selector, selectors._Composite):
        for part in selector.parts:
            _selector_kinds(part, found)
        if selector.kind == "and":
            found.add("&")
    elif isinstance(selector, selectors._Not):
        found.add("~")
        _selector_kinds(selector.inner, found)
    elif isinstance(selector, selectors._Where):
        found.add("where")
    elif isinstance(selector, selectors._Temporal):
        found.add("temporal")
    return found


class _Condition:
    """One selector of a rule, decided op by op: static subtrees by the core's live rules
    (``session.rule``), callables (value-dependent predicates) on the concrete value here. A
    selector made only of ``tl.module`` terms (a union of them) is decided at the call's exit."""

    def __init__(self, selector: Any, session: Any, what: str) -> None:
        kinds = _selector_kinds(selector, set())
        if "temporal" in kinds:
            raise _refuse(
                f"{what} with tl.followed_by / tl.preceded_by needs a look-back window",
                "followed_by_unsupported",
                "select the op itself (tl.func, tl.label, tl.module)",
            )
        self.at_exit_only = "module" in kinds
        if self.at_exit_only and kinds - {"module"}:
            raise _refuse(
                f"{what} mixes tl.module(...) with another selector kind; a module term is decided "
                "at the call's exit, the others at the op",
                "mixed_module_selector",
                "use tl.module terms alone (a union of them works), or tl.in_module(...) with the others",
            )
        self.selector = selector
        self.session = session
        self._rules: dict = {}
        self._compile(selector)

    def _compile(self, selector: Any) -> None:
        from torchlens import selectors

        if "where" not in _selector_kinds(selector, set()):
            self._rules[id(selector)] = self.session.rule(selector)
            return
        if isinstance(selector, selectors._Composite):
            for part in selector.parts:
                self._compile(part)
        elif isinstance(selector, selectors._Not):
            self._compile(selector.inner)

    def at_op(self, func: str, value_id: int, context: Any) -> bool:
        return bool(self._decide(self.selector, func, value_id, context))

    def _decide(self, selector: Any, func: str, value_id: int, context: Any) -> bool:
        from torchlens import selectors

        rule = self._rules.get(id(selector))
        if rule is not None:
            return bool(rule.at_op(func, value_id))
        if isinstance(selector, selectors._Where):
            return bool(selector.predicate(context()))
        if isinstance(selector, selectors._Not):
            return not self._decide(selector.inner, func, value_id, context)
        parts = selector.parts
        if selector.kind == "and":
            return all(self._decide(part, func, value_id, context) for part in parts)
        return any(self._decide(part, func, value_id, context) for part in parts)

    def at_exit(self, value_ids: list) -> list:
        return self._rules[id(self.selector)].at_exit(value_ids)


def _refuse(message: str, code: str, remedy: str) -> Exception:
    from . import refusals

    return refusals.refuse(message, code, remedy)


class LiveEdits:
    """``intervene=`` and ``stop_after=`` on a Paddle capture. The wrapper holds each concrete
    output before the caller sees it: matching rules replace it (the replacement flows on, keeps
    the op's identity and is its payload, with an edit record), and a matching stop rule ends
    the forward right there (nothing past the frontier runs). Every request is checked before
    the model runs."""

    def __init__(self, request: Any, adapter: Any) -> None:
        self.adapter = adapter
        self.request = request
        for rule in request.interventions:
            if rule.direction == "backward":
                raise _refuse(
                    "gradient-site interventions (direction='backward') need a captured backward pass",
                    "gradient_site_intervention_unsupported",
                    "edit forward values (leave direction unset), or use the PyTorch backend",
                )
            if not isinstance(rule.action, _NATIVE_ACTIONS):
                raise _refuse(
                    f"the {rule.action.describe()} helper has no Paddle implementation",
                    "edit_action_unsupported",
                    "use tl.zero_ablate, tl.scale, tl.add, tl.replace_with or a callable on paddle.Tensor",
                )
        self.recorder: Any = None
        self.session: Any = None
        self.rules: list = []
        self.stop: Any = None
        #: Value id → (the rule, the value before the edit): what replay checks.
        self.fired: dict = {}
        self.steps = 0
        self._fired_at_exit: set = set()

    def attach(self, session: Any, recorder: Any) -> None:
        """Compiles the rules against the declared modules and hooks the recorder."""
        self.session, self.recorder = session, recorder
        for rule in self.request.interventions:
            self.rules.append((rule, _Condition(rule.condition, session, "intervene=")))
        if self.request.stop_after is not None:
            self.stop = _Condition(self.request.stop_after.selector, session, "stop_after=")
        recorder.on_output = self.on_output
        recorder.on_exit = self.on_exit

    # ---- at the op -------------------------------------------------------------------------------

    def _context(self, func: str, value: Any, output_index: int) -> Any:
        from torchlens.edits.rules import RecordContext

        recorder = self.recorder

        def build() -> Any:
            with recorder.quiet():
                scalar_bool = value.dtype == paddle.bool and int(value.size) == 1
                flag = bool(value.item()) if scalar_bool else None
            stack = recorder.module_stack(self.session)
            return RecordContext(
                kind="compute",
                label=f"{func}_{self.steps}",
                func_name=func,
                step_index=self.steps,
                address=stack[-1] if stack else "self",
                module_stack=tuple(stack),
                shape=tuple(value.shape),
                dtype=str(value.dtype).rsplit(".", 1)[-1],
                output_index=output_index,
                tensor_requires_grad=not value.stop_gradient,
                is_scalar_bool=scalar_bool,
                bool_value=flag,
            )

        return build

    def on_output(self, func: str, value_id: int, value: Any) -> Any:
        self.steps += 1
        context = self._context(func, value, 0)
        current = value
        for rule, condition in self.rules:
            if not condition.at_exit_only and condition.at_op(func, value_id, context):
                current = self._fire(rule, value_id, current)
        if self.stop is not None and not self.stop.at_exit_only and self.stop.at_op(func, value_id, context):
            self._stop([value_id])
        return current

    def on_exit(self, module_id: int, value_ids: list, values: list) -> dict:
        """A module call returned: ``tl.module`` rules fire once here. Returns replacements by
        value id."""
        replaced: dict = {}
        by_id = dict(zip(value_ids, values))
        for index, (rule, condition) in enumerate(self.rules):
            if condition.at_exit_only:
                for value_id in condition.at_exit(value_ids):
                    if (index, value_id) in self._fired_at_exit:
                        continue  # an enclosing call returns the same value: it fired already
                    self._fired_at_exit.add((index, value_id))
                    replaced[value_id] = self._fire(rule, value_id, replaced.get(value_id, by_id[value_id]))
        if self.stop is not None and self.stop.at_exit_only:
            matched = self.stop.at_exit(value_ids)
            if matched:
                self._stop(matched)
        return replaced

    def _fire(self, rule: Any, value_id: int, value: Any) -> Any:
        recorder = self.recorder
        with recorder.quiet():
            new = self.adapter.apply_action(rule.action, value)
            if not isinstance(new, paddle.Tensor):
                raise TypeError(
                    f"{rule.action.describe()} returned {type(new).__name__}, not a paddle.Tensor"
                )
            _shape_kept(rule.action.describe(), value, new)
            if new.dtype != value.dtype:
                new = new.astype(value.dtype)
            if new is value:
                new = value.clone()
        recorder.adopt(value_id, new)
        previous = self.fired.get(value_id)
        original = previous[1] if previous is not None else value
        actions = (previous[0] if previous is not None else ()) + (rule.action,)
        self.fired[value_id] = (actions, original)
        self.session.edit(value_id, rule.describe(), rule.action.describe(), "post")
        return new

    def _stop(self, frontier: list) -> None:
        self.session.mark_stopped("stop_after", frontier)
        raise StopSignal()

    # ---- after the forward ------------------------------------------------------------------------

    def finish_stopped(self, session: Any, signal: Any) -> None:
        """The forward ended at the frontier: there are no outputs to report."""

    def prepare_runtime(self, runtime: Any) -> None:
        """Replay of an edited op re-applies its declared actions (the kit's ``replay_edits``)."""
        from torchlens.adapter_kit.replay import replay_edits

        replay_edits(runtime, self.fired, self.adapter, apply_natively, _output_of)


def _output_of(result: Any, output_index: Any) -> Any:
    from .capture import tensors_of

    return tensors_of(result)[output_index] if output_index is not None else result
