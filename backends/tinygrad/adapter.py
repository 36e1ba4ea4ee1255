"""The tinygrad adapter: the backend protocol for tinygrad."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

import numpy as np
from tinygrad import Tensor

from torchlens.adapter_kit import BackendProtocol
from torchlens.adapter_kit.capture_pipeline import CallRuntime, CaptureHooks
from torchlens.adapter_kit.host_conversions import HostConversions
from torchlens.adapter_kit.module_walk import bracketed_calls, install_module_calls

from . import refusals
from .capture import Recorder, training_mode
from .dtypes import neutral_name, tinygrad_dtype
from .grads import GradHooks, GradOptions
from .modules import ModuleTree, discover, has_module_state


@dataclass
class TinygradRuntime(CallRuntime):
    """Runtime-only data of a live trace: the kit's, plus the module tree and input ids the
    gradient passes read."""

    tree: Any = None
    input_ids: Any = None


class TinygradCapture(CaptureHooks):
    """The tinygrad side of the kit's capture pipeline: a UOp recorder, realized once."""

    runtime_type = TinygradRuntime

    def check(self) -> None:
        refusals.check_root(self.model)

    def make_recorder(self) -> Recorder:
        recorder = Recorder(self.session)
        recorder.snapshot()
        return recorder

    def declare_modules(self) -> None:
        model, mode, session = self.model, self.mode, self.session
        self.tree = tree = discover(model) if mode == "object_module" else ModuleTree()
        self.input_ids: List[int] = []
        name = type(model).__name__ if mode == "object_module" else getattr(model, "__name__", "function")
        session.module(0, ["self"], name, False, training_mode())
        for record in tree.modules[1:]:
            session.module(record.module_id, record.addresses, record.class_name, record.container, False)
        for address, owner, tensor, _trainable in tree.params:
            self.recorder.param(address, owner, tensor)

    def declare_input(self, name: str, value: Any) -> None:
        self.input_ids.append(self.recorder.input(name, value))

    def install(self) -> None:
        recorder = self.recorder
        recorder.install(self.patches)
        # Ops built during a discovered module's call are attributed to it.
        install_module_calls(self.patches, self.tree, bracketed_calls(self.session, self._known_ids))

    def _known_ids(self, output: Any) -> List[int]:
        known = self.recorder.known
        found = (known.get(tensor.uop) for _, tensor in self.adapter.output_pairs(output))
        return [value_id for value_id in found if value_id is not None]

    def exit_root(self, output: Any) -> Any:
        # Output ids are read under the wrappers: a literal output is recorded as its own op.
        self.outputs = [
            (name, self.recorder.value_id_of(tensor)) for name, tensor in self.adapter.output_pairs(output)
        ]
        self.session.exit(0, [value_id for _, value_id in self.outputs if value_id is not None])
        return output

    def declare_outputs(self, output: Any) -> None:
        for name, value_id in self.outputs:
            if value_id is not None:
                self.session.output(name, value_id)

    def runtime_fields(self) -> Dict[str, Any]:
        return {"tree": self.tree, "input_ids": self.input_ids}


class TinygradAdapter(HostConversions, BackendProtocol):
    """Fills the backend protocol for tinygrad."""

    array_type = Tensor
    grad_options_type = GradOptions
    grad_hooks_type = GradHooks
    capture_hooks = TinygradCapture
    module_root_description = "a callable object holding tinygrad Tensors or tinygrad.nn layers"

    def is_module_root(self, model: Any) -> bool:
        return has_module_state(model)

    def realize(self, values: List[Any]) -> List[Any]:
        """Realizes lazy Tensors in one evaluation."""
        tensors = [value for value in values if isinstance(value, Tensor)]
        if tensors:
            Tensor.realize(tensors[0], *tensors[1:])
        return values

    # ---- host copies (the kit's HostConversions over these) -------------------------------------

    def neutral_dtype(self, value: Any) -> str:
        return neutral_name(value.dtype)

    def array_from_host(self, array: np.ndarray) -> Any:
        return Tensor(array)

    def cast(self, value: Any, dtype: str) -> Any:
        return value.cast(tinygrad_dtype(dtype))

    def reinterpret(self, value: Any, dtype: str) -> Any:
        return value.bitcast(tinygrad_dtype(dtype))

    # ---- replay hooks -----------------------------------------------------------------------------
