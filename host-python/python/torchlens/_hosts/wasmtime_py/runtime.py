"""The component under the ``wasmtime`` package: compiled once per process (the compiled form
cached on disk, keyed by the component's digest and the package version), one instance per
thread, each call mapped to the typed errors of ``torchlens.errors``.

The sandbox is the native host's (host-runtime/src/sandbox.rs): every WASI import traps except
the random interfaces std asks for at start-up, which get fixed bytes; linear memory is capped
at 4 GiB like the native host's trusted limits. For files from anyone
(``tl.load(path, untrusted=True)``) a second runtime runs under :data:`UNTRUSTED`, the CLI's
limits: 512 MiB, a fuel budget and a 30 s deadline per call (epoch interruption).
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime import component as wc

from ... import errors
from ...terminal_text import shown
from .installed import wasmtime_version
from .values import converters

CORE_INTERFACE = "torchlens:core/core@0.1.0"
MEMORY_CAP = 4 << 30


class Limits(NamedTuple):
    """What an instance may use (host-runtime's ``SandboxLimits``)."""

    memory_bytes: int
    #: Fuel per call (about one per wasm instruction); None: no fuel metering.
    fuel_per_call: Optional[int]
    #: Wall-clock seconds per call; None: no deadline.
    deadline_seconds: Optional[float]


#: In-process use on the user's own data (the native host's ``SandboxLimits::trusted``).
TRUSTED = Limits(MEMORY_CAP, None, None)
#: Files from anyone: the CLI's limits (``SandboxLimits::untrusted``).
UNTRUSTED = Limits(512 << 20, 20_000_000_000, 30.0)
#: How often the epoch advances under a deadline (host-runtime's ``EPOCH_TICK``).
EPOCH_TICK_SECONDS = 0.01
_WASI_VERSIONS = [f"0.2.{minor}" for minor in range(10)]
_SEED = (0x5EED, 0x7E11)

_FAMILIES = {
    "invalid-events": "CaptureEventsError",
    "invalid-selector": "SelectorError",
    "malformed-file": "TlspecFormatError",
    "unsupported-version": "TlspecVersionError",
    "limit-exceeded": "LimitExceededError",
    "invalid-trace": "InvalidTraceError",
    "not-found": "NotFoundError",
}


def core_error(family: str, info: dict) -> errors.TorchLensError:
    """The ``torchlens.errors`` exception for a ``core-error`` (as errors.rs maps it)."""
    if info["code"] == "backend_capability_conformance":
        name = "BackendCapabilityConformanceError"
    else:
        name = _FAMILIES.get(family, "UnsupportedError")
    # The message may quote a file's strings and ends up in a traceback: shown escaped by the
    # core's function, as the native host does (a typed error is an ordinary return: the core
    # is alive).
    return getattr(errors, name)(shown(info["message"]), info["code"], info["remedy"])


def _fixed_bytes(length: int) -> bytes:
    # The native sandbox's pattern (sandbox.rs `fixed_bytes`): deterministic, not random.
    return bytes(((index * 31 + 7) & 0xFF) for index in range(min(length, 1 << 16)))


def _cache_dir() -> Optional[Path]:
    """The native host's cache directory rule (host-runtime/src/embedded.rs)."""
    if os.environ.get("TORCHLENS_CACHE_DIR"):
        return Path(os.environ["TORCHLENS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME") else None
    )
    return Path(base) / "torchlens" if base else None


def _compile(engine: wasmtime.Engine, component_bytes: bytes, metered: bool = False) -> wc.Component:
    """Compiles the component, or loads the compiled form this package version wrote (a
    metered engine's code differs: it has its own cache entry)."""
    digest = hashlib.sha256(component_bytes).hexdigest()[:24]
    version = wasmtime_version()
    directory = _cache_dir()
    kind = "-metered" if metered else ""
    cached = directory / f"wasmtime-py-{version}-{digest}{kind}.cwasm" if directory else None
    if cached is not None and cached.is_file():
        try:
            # Only bytes this code wrote for these exact component bytes and wasmtime version.
            return wc.Component.deserialize(engine, cached.read_bytes())
        except wasmtime.WasmtimeError:
            pass
    component = wc.Component(engine, component_bytes)
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
            partial.write_bytes(bytes(component.serialize()))
            os.replace(partial, cached)
        except OSError:
            pass  # A read-only cache only costs the next process a compile.
    return component


class Runtime:
    """The compiled component and its linker, shared by every thread's instance."""

    def __init__(self, component_bytes: bytes, limits: Limits = TRUSTED) -> None:
        self.component_bytes = component_bytes
        self.limits = limits
        config = wasmtime.Config()
        metered = limits.fuel_per_call is not None or limits.deadline_seconds is not None
        if limits.fuel_per_call is not None:
            config.consume_fuel = True
        if limits.deadline_seconds is not None:
            config.epoch_interruption = True
        self.engine = wasmtime.Engine(config)
        self.component = _compile(self.engine, component_bytes, metered)
        if limits.deadline_seconds is not None:
            _start_epoch_ticker(self.engine)
        self.linker = wc.Linker(self.engine)
        self._answer_random()
        self.linker.define_unknown_imports_as_traps(self.component)

    def _answer_random(self) -> None:
        imported = set(self.component.type.imports(self.engine))
        with self.linker.root() as root:
            for version in _WASI_VERSIONS:
                name = f"wasi:random/random@{version}"
                if name in imported:
                    with root.add_instance(name) as random:
                        random.add_func("get-random-bytes", lambda store, length: _fixed_bytes(length))
                        random.add_func("get-random-u64", lambda store: _SEED[0])
                name = f"wasi:random/insecure-seed@{version}"
                if name in imported:
                    with root.add_instance(name) as seed:
                        seed.add_func("insecure-seed", lambda store: _SEED)
                name = f"wasi:random/insecure@{version}"
                if name in imported:
                    with root.add_instance(name) as insecure:
                        insecure.add_func(
                            "get-insecure-random-bytes", lambda store, length: _fixed_bytes(length)
                        )
                        insecure.add_func("get-insecure-random-u64", lambda store: _SEED[0])

    def instantiate(self) -> Instance:
        return Instance(self)


def _start_epoch_ticker(engine: wasmtime.Engine) -> None:
    """Advances the engine's epoch every tick on a daemon thread, for as long as the engine
    lives (held weakly, so the thread ends with it)."""
    held = weakref.ref(engine)

    def tick() -> None:
        while True:
            time.sleep(EPOCH_TICK_SECONDS)
            current = held()
            if current is None:
                return
            try:
                current.increment_epoch()
            except Exception:  # the engine was closed at exit
                return
            del current

    threading.Thread(target=tick, name="torchlens-epoch", daemon=True).start()


class _Export:
    """One exported function with its converters, built on first use."""

    __slots__ = ("func", "lowers", "lift")

    def __init__(self, func: wc.Func, store: wasmtime.Store) -> None:
        self.func = func
        with func.type(store) as func_type:
            self.lowers = [converters(param_type)[0] for _, param_type in func_type.params]
            result = func_type.result
            self.lift = converters(result)[1] if result is not None else None


class Instance:
    """One instance of the core with its store; dead after a trap."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store = wasmtime.Store(runtime.engine)
        self.store.set_limits(memory_size=runtime.limits.memory_bytes)
        self._arm()
        self.dead = False
        try:
            self.instance = runtime.linker.instantiate(self.store, runtime.component)
        except wasmtime.WasmtimeError as error:
            raise errors.CoreUnavailableError(
                f"the core component could not be instantiated: {error}",
                "core_component_unavailable",
                "reinstall torchlens if this persists",
            ) from error
        self._interface = self.instance.get_export_index(self.store, CORE_INTERFACE)
        self._exports: Dict[str, _Export] = {}
        self.lock = threading.Lock()
        # Resources whose Python owners were collected; freed before the next call. A finalizer
        # may run in the middle of a call (garbage collection while values are lowered), where
        # taking the lock or entering the component again would deadlock or re-enter.
        self._garbage: List[wc.ResourceAny] = []
        # Every live resource handle, so interpreter exit can free them while the wasmtime
        # package's C bindings still exist (its finalizers fail noisily after module teardown).
        self.handles: weakref.WeakSet[wc.ResourceAny] = weakref.WeakSet()

    def _arm(self) -> None:
        """Refills the fuel and resets the deadline for the next call (untrusted limits)."""
        limits = self.runtime.limits
        if limits.fuel_per_call is not None:
            self.store.set_fuel(limits.fuel_per_call)
        if limits.deadline_seconds is not None:
            self.store.set_epoch_deadline(max(1, int(limits.deadline_seconds / EPOCH_TICK_SECONDS)))

    def _trap_code(self, started: float) -> str:
        """Which limit stopped a call (wasmtime-py gives traps no code): the fuel ran out, the
        deadline passed, or something else (a memory cap or a bug)."""
        limits = self.runtime.limits
        if limits.fuel_per_call is not None and self.store.get_fuel() == 0:
            return "sandbox_fuel_exhausted"
        if limits.deadline_seconds is not None and time.monotonic() - started >= limits.deadline_seconds:
            return "sandbox_deadline_exceeded"
        return "sandbox_trap"

    def _export(self, name: str) -> _Export:
        export = self._exports.get(name)
        if export is None:
            index = self.instance.get_export_index(self.store, name, self._interface)
            func = self.instance.get_func(self.store, index) if index is not None else None
            if func is None:
                raise errors.CoreUnavailableError(
                    f"the core component exports no {name!r}",
                    "core_component_unavailable",
                    "reinstall torchlens: the component and the package disagree",
                )
            export = self._exports[name] = _Export(func, self.store)
        return export

    def call(self, name: str, *params: Any) -> Any:
        """Calls an export; a trap kills the instance and raises ``CoreTrapError``."""
        if self.dead:
            raise errors.CoreTrapError(
                "this core instance trapped earlier; create a new one",
                "core_instance_dead",
                "reinstall torchlens if this persists",
            )
        if self._garbage:
            self._collect()
        export = self._export(name)
        count = len(params)
        raw_params = (ffi.wasmtime_component_val_t * max(count, 1))()
        lowered = 0
        result = ffi.wasmtime_component_val_t()
        with self.lock:
            self._arm()
            started = time.monotonic()
            try:
                for lower, value in zip(export.lowers, params):
                    lower(self.store, value, ctypes.pointer(raw_params[lowered]))
                    lowered += 1
                error = ffi.wasmtime_component_func_call(
                    ctypes.byref(export.func._func),
                    self.store._context(),
                    raw_params,
                    count,
                    ctypes.byref(result) if export.lift is not None else None,
                    1 if export.lift is not None else 0,
                )
            finally:
                for index in range(lowered):
                    ffi.wasmtime_component_val_delete(ctypes.byref(raw_params[index]))
        if error:
            self.dead = True
            trap = wasmtime.WasmtimeError._from_ptr(error)
            code = self._trap_code(started)
            remedy = (
                "reinstall torchlens if this persists"
                if code == "sandbox_trap" and self.runtime.limits == TRUSTED
                else "the file needs more memory or time than the untrusted sandbox allows; "
                "if you trust it, load it without untrusted=True"
            )
            raise errors.CoreTrapError(f"the core component stopped: {trap}", code, remedy)
        if export.lift is None:
            return None
        try:
            return export.lift(ctypes.addressof(result))
        finally:
            ffi.wasmtime_component_val_delete(ctypes.byref(result))

    def checked(self, name: str, *params: Any) -> Any:
        """Calls an export returning ``result<T, core-error>``; raises the typed error."""
        ok, value = self.call(name, *params)
        if ok:
            return value
        family, info = value
        raise core_error(family, info)

    def drop(self, resource: wc.ResourceAny) -> None:
        """Frees a resource inside the instance at the next call (nothing to do once it is
        dead). Safe from finalizers: it only queues."""
        if not self.dead:
            self._garbage.append(resource)

    def track(self, resource: wc.ResourceAny) -> wc.ResourceAny:
        """Registers a resource handle this instance gave out; returns it."""
        self.handles.add(resource)
        return resource

    def close(self) -> None:
        """Frees the C objects of this instance (at interpreter exit); it is dead afterwards."""
        self.dead = True
        for handle in list(self.handles):
            handle.close()
        if self._interface is not None:
            self._interface.close()
        self.store.close()

    def _collect(self) -> None:
        with self.lock:
            garbage, self._garbage = self._garbage, []
            for resource in garbage:
                try:
                    resource.drop(self.store)
                except ValueError:
                    # The garbage collector finalized the handle's wrapper in the same cycle as
                    # its owner: the handle is gone, the guest keeps the (unreachable) entry.
                    continue
                except wasmtime.WasmtimeError:
                    self.dead = True
                    return


class Threads:
    """The runtime (compiled once) and this thread's instance (fresh after a trap)."""

    def __init__(self, load_component: Callable[[], bytes], limits: Limits = TRUSTED) -> None:
        self._load_component = load_component
        self._limits = limits
        self._runtime: Optional[Runtime] = None
        self._runtime_lock = threading.Lock()
        self._local = threading.local()
        self._instances: weakref.WeakSet[Instance] = weakref.WeakSet()
        atexit.register(self.close)

    def close(self) -> None:
        """Frees every instance and the compiled component while the C bindings still exist."""
        for instance in list(self._instances):
            instance.close()
        if self._runtime is not None:
            self._runtime.linker.close()
            self._runtime.component.close()
            self._runtime.engine.close()
            self._runtime = None

    def runtime(self) -> Runtime:
        with self._runtime_lock:
            if self._runtime is None:
                try:
                    self._runtime = Runtime(self._load_component(), self._limits)
                except wasmtime.WasmtimeError as error:
                    raise errors.CoreUnavailableError(
                        f"the core component could not be compiled: {error}",
                        "core_component_unavailable",
                        "reinstall torchlens if this persists",
                    ) from error
            return self._runtime

    def fresh_instance(self) -> Tuple[Instance, Runtime]:
        """A new instance of its own (not this thread's shared one)."""
        runtime = self.runtime()
        instance = runtime.instantiate()
        self._instances.add(instance)
        return instance, runtime

    def instance(self) -> Tuple[Instance, Runtime]:
        runtime = self.runtime()
        instance = getattr(self._local, "instance", None)
        if instance is None or instance.dead:
            instance = self._local.instance = runtime.instantiate()
            self._instances.add(instance)
        return instance, runtime
