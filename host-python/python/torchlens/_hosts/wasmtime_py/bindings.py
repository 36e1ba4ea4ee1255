"""``Core``, ``Session`` and ``Trace`` over the ``wasmtime`` package: the same methods, argument
orders and return shapes as the pyo3 extension's classes (host-python/bridge/src/engine.rs,
session.rs, trace.rs), so nothing above ``torchlens._hosts`` knows which host runs."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import events
from .runtime import Instance, Runtime

_RENAMED_OP_FIELDS = {"pass": "pass_number"}
_DISTANCE_FIELDS = {
    "min_from_input": "min_distance_from_input",
    "max_from_input": "max_distance_from_input",
    "min_to_output": "min_distance_to_output",
    "max_to_output": "max_distance_to_output",
}


#: Ops one ``ops`` call copies out of the component at most (the native host's OPS_PER_CALL).
OPS_PER_CALL = 16_384


def _selector(arena: Any) -> dict:
    """A selector arena ``(nodes, root)`` (see convert.rs ``selector``) as the WIT record."""
    try:
        nodes, root = arena
    except (TypeError, ValueError):
        raise TypeError("a selector arena is (nodes, root); build selectors with tl.func & co") from None
    converted = []
    for kind, payload in nodes:
        if kind in ("followed_by", "preceded_by"):
            first, other, within = payload
            converted.append((kind.replace("_", "-"), {"first": first, "other": other, "within": within}))
        elif kind in (
            "func",
            "label",
            "label_contains",
            "module",
            "in_module",
            "and",
            "or",
            "not",
            "where",
            "downstream_of",
            "upstream_of",
        ):
            converted.append((kind.replace("_", "-"), list(payload) if kind in ("and", "or") else payload))
        else:
            raise ValueError(f"unknown selector node kind {kind!r}")
    return {"nodes": converted, "root": root}


def _selector_arena(selector: dict) -> tuple:
    """A checked WIT selector as the arena ``(nodes, root)`` that :func:`_selector` reads
    (convert.rs ``selector_arena``)."""
    nodes = []
    for case, payload in selector["nodes"]:
        kind = case.replace("-", "_")
        if kind in ("followed_by", "preceded_by"):
            nodes.append((kind, (payload["first"], payload["other"], payload["within"])))
        else:
            nodes.append((kind, list(payload) if kind in ("and", "or") else payload))
    return nodes, selector["root"]


def _live_plan(plan: dict) -> tuple:
    """A live plan as ``(nodes, root)`` of kind-led tuples (convert.rs ``live_plan``)."""
    nodes = []
    for case, payload in plan["nodes"]:
        kind = case.replace("-", "_")
        if kind in ("in_module", "module_output"):
            nodes.append((kind, payload["modules"], payload["root"], payload["call"]))
        elif kind == "func":
            nodes.append(("func", payload[0], payload[1]))
        elif kind == "followed_by":
            nodes.append(("followed_by", payload[0], payload[1]))
        elif kind == "graph":
            nodes.append(("graph",))
        else:
            nodes.append((kind, payload))
    return nodes, plan["root"]


def _op_info(op: dict) -> dict:
    info = {_RENAMED_OP_FIELDS.get(key, key): value for key, value in op.items() if key != "distances"}
    info["kind"] = op["kind"].replace("-", "_")
    info["parents"] = [(edge["op"], edge["position"]) for edge in op["parents"]]
    info["children"] = [(edge["op"], edge["position"]) for edge in op["children"]]
    source = op["source"]
    info["source"] = (source["file"], source["line"], source["function"]) if source is not None else None
    if op["distances"] is not None:
        for key, name in _DISTANCE_FIELDS.items():
            info[name] = op["distances"][key]
    info["edits"] = [(edit["rule"], edit["action"], edit["timing"]) for edit in op["edits"]]
    # Field order as the native host builds the dict (callers may print it).
    del info["value"]
    info["value"] = op["value"]
    return info


def _trace_info(info: dict) -> dict:
    options = info["options"]
    out = {
        "recurrence_detection": options["recurrence_detection"],
        "compute_input_output_distances": options["compute_input_output_distances"],
    }
    out.update((key, value) for key, value in info.items() if key != "options")
    return out


def _header_info(info: dict) -> dict:
    return {
        "manifest": dict(info["manifest"]),
        "format_version": info["format_version"],
        "body_offset": info["body_offset"],
        "body_length": info["body_length"],
        "payloads": [
            (
                entry["label"],
                entry["dtype"],
                entry["storage_dtype"],
                entry["shape"],
                entry["offset"],
                entry["length"],
            )
            for entry in info["payloads"]
        ],
        "crc_table_offset": info["crc_table_offset"],
    }


def _manifest(value: Any) -> dict:
    def get(key: str) -> Any:
        try:
            item = value[key]
        except (KeyError, IndexError, TypeError):
            return None
        return item

    texts = ("backend", "backend_runtime", "backend_version", "payload_policy", "save_level", "created_at")
    manifest = {key: get(key) or "" for key in texts + ("codec_metadata",)}
    manifest["payload_checksums"] = [tuple(item) for item in get("payload_checksums") or []]
    manifest["extra"] = [tuple(item) for item in get("extra") or []]
    return manifest


class Trace:
    """A trace held by the core (``_native.Trace``)."""

    def __init__(self, instance: Instance, handle: Any) -> None:
        self._instance = instance
        self._handle = instance.track(handle)

    def _call(self, method: str, *params: Any) -> Any:
        return self._instance.call(f"[method]trace.{method}", self._handle, *params)

    def info(self) -> dict:
        return _trace_info(self._call("info"))

    def ops(self, start: int = 0, count: int = 0xFFFFFFFF) -> List[dict]:
        # A page at a time, as the native host does (trace.rs OPS_PER_CALL): no call copies more
        # than a bounded amount out of the component.
        found: List[dict] = []
        end = min(start + count, 0xFFFFFFFF)
        while start < end:
            page = min(end - start, OPS_PER_CALL)
            ops = self._call("ops", start, page)
            found.extend(_op_info(op) for op in ops)
            if len(ops) < page:
                break
            start += page
        return found

    def find_label(self, label: str) -> Optional[int]:
        return self._call("find-label", label)

    def layers(self) -> List[Tuple[str, str, List[int]]]:
        return [(layer["label"], layer["op_type"], layer["ops"]) for layer in self._call("layers")]

    def modules(self) -> List[dict]:
        modules = self._call("modules")
        for module in modules:
            module["calls"] = [
                (call["name"], call["call_number"], call["first_op"], call["end_op"], call["outputs"])
                for call in module["calls"]
            ]
        return modules

    def params(self) -> List[dict]:
        return self._call("params")

    def summary_table(self) -> str:
        return self._call("summary-table")

    def select(self, selector: Any, where_results: Sequence[Tuple[int, List[int]]] = ()) -> List[int]:
        results = [{"predicate": predicate, "matched": list(matched)} for predicate, matched in where_results]
        return self._instance.checked("[method]trace.select", self._handle, _selector(selector), results)

    def ancestors(self, op: int) -> List[int]:
        return self._call("ancestors", op)

    def descendants(self, op: int) -> List[int]:
        return self._call("descendants", op)

    def keep_payloads(self, slots: Sequence[int]) -> None:
        self._call("keep-payloads", list(slots))

    def encode(self, manifest: Any) -> Tuple[bytes, list, Optional[int], int]:
        layout = self._instance.checked("[method]trace.encode", self._handle, _manifest(manifest))
        placements = [
            (item["op"], item["slot"], item["label"], item["offset"], item["length"], item["dtype"])
            for item in layout["payloads"]
        ]
        return layout["prefix"], placements, layout["crc_table_offset"], layout["file_length"]

    def svg(self, collapsed: bool = False, expanded: Sequence[str] = (), backward: bool = False) -> str:
        if backward:
            view = ("backward", None)
        else:
            view = ("collapsed", list(expanded)) if collapsed else ("full", None)
        return self._instance.checked("[method]trace.svg", self._handle, view)

    def set_backward(self, graph: Optional[str] = None) -> None:
        self._instance.checked("[method]trace.set-backward", self._handle, graph)

    def backward_json(self) -> Optional[str]:
        return self._call("backward")

    def body(self) -> bytes:
        return self._call("body")

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            try:
                self._instance.drop(handle)
            except Exception:  # noqa: BLE001 - a finalizer must not raise (interpreter exit)
                pass


class Session:
    """A capture in progress (``_native.Session``): events are encoded as they come and sent
    as one postcard batch per ``flush``."""

    def __init__(self, instance: Instance, handle: Any) -> None:
        self._instance = instance
        self._handle = instance.track(handle)
        self._pending: List[bytes] = []
        self._held: List[Tuple[int, bool]] = []

    def _live(self) -> Any:
        if self._handle is None:
            raise RuntimeError("this capture session is finished")
        return self._handle

    def module(self, id: int, addresses: List[str], class_name: str, container: bool, training: bool) -> None:
        self._pending.append(events.module(id, addresses, class_name, container, training))

    def param(
        self, tensor: int, address: str, module: int, shape: Sequence[int], dtype: str, trainable: bool
    ) -> None:
        self._pending.append(events.param(tensor, address, module, shape, dtype, trainable))

    def declare_model(
        self,
        modules: Sequence[Tuple[int, List[str], str, bool, bool]],
        params: Sequence[Tuple[int, str, int, Sequence[int], str, bool]],
    ) -> Tuple[bytes, ...]:
        prepared = tuple(events.module(*module) for module in modules) + tuple(
            events.param(*param) for param in params
        )
        self._pending.extend(prepared)
        return prepared

    def replay(self, prepared: Tuple[bytes, ...]) -> None:
        self._pending.extend(prepared)

    def input(
        self, name: str, tensor: int, shape: Sequence[int], dtype: str, payload: Optional[int] = None
    ) -> None:
        self._pending.append(events.input(name, tensor, shape, dtype, payload))

    def buffer(
        self, address: str, tensor: int, shape: Sequence[int], dtype: str, payload: Optional[int] = None
    ) -> None:
        self._pending.append(events.buffer(address, tensor, shape, dtype, payload))

    def constant(self, tensor: int, shape: Sequence[int], dtype: str, payload: Optional[int] = None) -> None:
        self._pending.append(events.constant(tensor, shape, dtype, payload))

    def op(
        self,
        func: str,
        args: Sequence[Tuple[int, int]],
        outputs: Sequence[Tuple[int, Sequence[int], str, Optional[int]]],
        in_place: bool = False,
        attributes: Sequence[Tuple[str, str]] = (),
        source: Optional[Tuple[str, int, str]] = None,
    ) -> None:
        self._pending.append(events.op(func, args, outputs, in_place, attributes, source))

    def enter(self, module: int) -> None:
        self._pending.append(events.enter(module))

    def exit(self, module: int, outputs: Sequence[int]) -> None:
        self._pending.append(events.exit(module, outputs))

    def output(self, name: str, tensor: int) -> None:
        self._pending.append(events.output(name, tensor))

    def extra(self, key: str, value: str) -> None:
        self._pending.append(events.extra(key, value))

    def edit(self, value: int, rule: str, action: str, timing: str) -> None:
        self._pending.append(events.edit(value, rule, action, timing))

    def pending_events(self) -> int:
        return len(self._pending)

    def _send_pending(self) -> List[Tuple[int, bool]]:
        handle = self._live()
        if not self._pending:
            return []
        batch, self._pending = events.batch(self._pending), []
        decisions = self._instance.checked("[method]capture-session.ingest", handle, batch)
        return [(decision["value"], decision["selected"]) for decision in decisions]

    def flush(self) -> List[Tuple[int, bool]]:
        fresh = self._send_pending()
        decisions, self._held = self._held, []
        decisions.extend(fresh)
        return decisions

    def mark_stopped(self, reason: str, frontier: Sequence[int]) -> None:
        handle = self._live()
        self._held.extend(self._send_pending())
        self._instance.checked("[method]capture-session.mark-stopped", handle, reason, list(frontier))

    def live_plan(self) -> Optional[tuple]:
        plan = self._instance.checked("[method]capture-session.live-plan", self._live())
        return _live_plan(plan) if plan is not None else None

    def add_rule(self, selector: Any) -> int:
        return self._instance.checked("[method]capture-session.add-rule", self._live(), _selector(selector))

    def rule_plan(self, rule: int) -> tuple:
        return _live_plan(self._instance.checked("[method]capture-session.rule-plan", self._live(), rule))

    def rule_matches(self, rule: int, value: int) -> Optional[bool]:
        return self._instance.checked("[method]capture-session.rule-matches", self._live(), rule, value)

    def mark_unverified(self, reason: str) -> None:
        self._instance.call("[method]capture-session.mark-unverified", self._live(), reason)

    def finish(self) -> Tuple[Trace, List[Tuple[int, bool]]]:
        decisions = self.flush()
        handle, self._handle = self._live(), None
        trace, last = self._instance.checked("[static]capture-session.finish", handle)
        decisions.extend((decision["value"], decision["selected"]) for decision in last)
        return Trace(self._instance, trace), decisions

    def abandon(self) -> None:
        self._pending.clear()
        self._held.clear()
        handle, self._handle = self._handle, None
        if handle is not None:
            self._instance.drop(handle)

    def __del__(self) -> None:
        try:
            self.abandon()
        except Exception:  # noqa: BLE001 - a finalizer must not raise (interpreter exit)
            pass


class Core:
    """The core component running in this thread (``_native.Core``)."""

    def __init__(self, instance: Instance, runtime: Runtime) -> None:
        self._instance = instance
        self._runtime = runtime

    def version(self) -> str:
        return self._instance.call("version")

    def build_id(self) -> str:
        return self._instance.call("build-id")

    def component_size(self) -> int:
        return len(self._runtime.component_bytes)

    def start_session(
        self, recurrence_detection: bool, compute_input_output_distances: bool, plan: Any = None
    ) -> Session:
        options = {
            "recurrence_detection": recurrence_detection,
            "compute_input_output_distances": compute_input_output_distances,
        }
        selector = _selector(plan) if plan is not None else None
        handle = self._instance.checked("[static]capture-session.start", options, selector)
        return Session(self._instance, handle)

    def tlspec_header_length(self, first_bytes: bytes) -> int:
        return self._instance.checked("tlspec-header-length", bytes(first_bytes))

    def parse_tlspec_header(self, header: bytes, file_length: int) -> dict:
        return _header_info(self._instance.checked("parse-tlspec-header", bytes(header), file_length))

    def decode_tlspec(self, header: bytes, body: bytes, file_length: int) -> Tuple[dict, Trace]:
        info, trace = self._instance.checked("decode-tlspec", bytes(header), bytes(body), file_length)
        return _header_info(info), Trace(self._instance, trace)

    def fold_validation(
        self, decisions: Sequence[Tuple[int, str, str]], runtime_capture_available: bool
    ) -> dict:
        outcomes = {"passed", "failed", "not_replayable", "leaf"}
        converted = []
        for op, outcome, reason in decisions:
            if outcome not in outcomes:
                raise ValueError(f"unknown replay outcome {outcome!r}")
            converted.append({"op": op, "outcome": outcome.replace("_", "-"), "reason": reason})
        return self._instance.call("fold-validation", converted, runtime_capture_available)

    def op_type(self, func_name: str) -> str:
        return self._instance.call("op-type", func_name)

    def escape_terminal_text(self, text: str) -> str:
        return self._instance.call("escape-terminal-text", text)

    def classify_selector(self, selector: Any) -> str:
        return self._instance.checked("classify-selector", _selector(selector))

    def parse_selector(self, expression: str) -> tuple:
        return _selector_arena(self._instance.checked("parse-selector", expression))

    def trace_from_body(self, body: bytes) -> Trace:
        return Trace(self._instance, self._instance.checked("[static]trace.from-body", bytes(body)))

    def refusal_codes(self) -> List[Tuple[str, str, str]]:
        return [
            (entry["code"], entry["owner"], entry["meaning"])
            for entry in self._instance.call("refusal-codes")
        ]

    def validation_reasons(self) -> List[Tuple[str, str]]:
        return [(entry["code"], entry["meaning"]) for entry in self._instance.call("validation-reasons")]

    def capabilities(self) -> List[Tuple[str, str, str]]:
        return [
            (entry["name"], entry["refusal"], entry["meaning"])
            for entry in self._instance.call("capabilities")
        ]

    @staticmethod
    def _declaration(
        name: str, capabilities: Sequence[Tuple[str, bool]], implementations: Sequence[str]
    ) -> dict:
        return {
            "name": name,
            "capabilities": [tuple(item) for item in capabilities],
            "implementations": list(implementations),
        }

    def register_backend(
        self, name: str, capabilities: Sequence[Tuple[str, bool]], implementations: Sequence[str]
    ) -> None:
        self._instance.checked("register-backend", self._declaration(name, capabilities, implementations))

    def gate(
        self,
        name: str,
        capabilities: Sequence[Tuple[str, bool]],
        implementations: Sequence[str],
        capability: str,
    ) -> Optional[str]:
        declaration = self._declaration(name, capabilities, implementations)
        case, code = self._instance.checked("gate", declaration, capability)
        return None if case == "admitted" else code

    def sandboxed(self) -> bool:
        # Whether the runtime meters fuel (the untrusted limits), as the native host answers.
        return self._runtime.limits.fuel_per_call is not None
