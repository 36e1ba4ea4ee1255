"""Module calls reported by a bracket around each module's own ``forward``, not by global hooks.

A global forward hook sends every module call in the process down ``Module._call_impl``'s slow
path (the hook loops run in Python, around a closure made per call): measured under a capture's
function mode, about 5.7 µs per module call against 0.4 µs for a plain call (a transformer
trace with 45 module calls took 0.2–0.5 ms longer with hooks than with brackets, in runs of 3.3
to 5.5 ms). A module with no hooks takes the
fast path, which calls ``self.forward``; an instance attribute ``forward`` takes precedence over
the class's method, so a bracket installed in the instance's ``__dict__`` sees every call of
that module on the fast path, for the cost of one small Python call.

Brackets are installed on the modules of the traced model's tree (the ones the trace declares)
for the length of a capture. They are shared: several threads may trace the same model at once,
so each module has at most one bracket, counted by the captures using it, and the bracket hands
the call to the capture of the thread it runs on (other threads' calls pass straight through).
When the last capture using a module ends, the module gets back what it had: no ``forward`` in
its ``__dict__``, or the one that was there.

A module with forward hooks of its own takes the slow path anyway. There the capture's hooks go
in as the module's first pre-hook and first forward hook instead (``prepend=True``), so the
trace keeps the order global hooks gave it: a pre-hook's ops inside the call, a forward hook's
ops after it.

What a global hook saw and a bracket does not: a module that is not in the traced model's tree
(one built inside the forward, or another model's module called from it). Such a call is not
bracketed; its ops belong to the module that called it. A function root (no module tree) keeps
the global hooks. And while a capture runs, each bracketed module's ``__dict__`` holds the
bracket: code inside the forward that pickles or deep-copies the model sees it there.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch

#: Thread ident → (the capture's pre hook, its post hook, the native ``ModuleCallHooks`` they
#: belong to or None) while the thread captures. The native bracket calls a ``ModuleCallHooks``
#: directly; the Python bracket calls the two hooks.
_HOOKS_BY_THREAD: Dict[int, Tuple[Callable[..., Any], Callable[..., Any], Any]] = {}

#: ``id(module)`` → the installation on it.
_INSTALLED: Dict[int, _Installation] = {}
_LOCK = threading.Lock()

_NOTHING = object()


class _Installation:
    """One module's Python bracket (or, on a module with hooks of its own, its two prepended
    hooks), how many captures use it, and what its ``__dict__`` held before. A native bracket is
    its own record (``install_brackets`` in ``backends/torch/native/src/module_bracket.rs``)."""

    __slots__ = ("module", "bracket", "previous", "handles", "users")

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.bracket: Any = None
        self.previous: Any = _NOTHING
        self.handles: Tuple[Any, ...] = ()
        self.users = 0
        if module._forward_pre_hooks or module._forward_hooks:
            pre = module.register_forward_pre_hook(_thread_pre_hook, prepend=True)
            try:
                post = module.register_forward_hook(_thread_post_hook, prepend=True)
            except BaseException:
                pre.remove()
                raise
            self.handles = (pre, post)
            return
        own = module.__dict__
        self.previous = own.get("forward", _NOTHING)
        self.bracket = _bracket_for(module, module.forward)
        own["forward"] = self.bracket


def _thread_pre_hook(module: torch.nn.Module, args: Any) -> None:
    hooks = _HOOKS_BY_THREAD.get(threading.get_ident())
    if hooks is not None:
        hooks[0](module, args)


def _thread_post_hook(module: torch.nn.Module, args: Any, output: Any) -> Any:
    hooks = _HOOKS_BY_THREAD.get(threading.get_ident())
    if hooks is None:
        return None
    return hooks[1](module, args, output)


@functools.cache
def _native_functions() -> Any:
    """The native extension, or None (the pure wheel)."""
    try:
        from torchlens import _native  # lazy: the native extension is absent from the pure wheel
    except ImportError:
        return None
    return _native


def _bracket_for(module: torch.nn.Module, forward: Callable[..., Any]) -> Callable[..., Any]:
    """The Python bracket of one module around its ``forward`` (read before the bracket went
    in): the definition, which the pure host and captures with Python hooks run. A capture
    whose hooks are native gets ``_native.ModuleBracket`` instead (``install_brackets`` in
    ``backends/torch/native/src/module_bracket.rs``), which does the same with no Python frame. Either
    serves every capture that shares the module later."""
    hooks_by_thread = _HOOKS_BY_THREAD
    thread_ident = threading.get_ident

    def bracketed_forward(*args: Any, **kwargs: Any) -> Any:
        hooks = hooks_by_thread.get(thread_ident())
        if hooks is None:
            return forward(*args, **kwargs)
        pre, post, _ = hooks
        pre(module, args)
        output = forward(*args, **kwargs)
        replaced = post(module, args, output)
        return output if replaced is None else replaced

    bracketed_forward.__wrapped__ = forward  # type: ignore[attr-defined]
    return bracketed_forward


def can_bracket(modules: Sequence[torch.nn.Module]) -> bool:
    """Whether every module takes an instance ``forward`` (a module without a ``__dict__``,
    as a slotted subclass could be, does not)."""
    return all(isinstance(getattr(module, "__dict__", None), dict) for module in modules)


def install(
    modules: Sequence[torch.nn.Module],
    pre: Callable[..., Any],
    post: Callable[..., Any],
    native_hooks: Any = None,
) -> Callable[[], None]:
    """Brackets ``modules`` for the calling thread's capture, whose module hooks are ``pre``
    (``pre(module, args)``) and ``post`` (``post(module, args, output)``, returning a
    replacement output or None); ``native_hooks``, when given, is the ``_native.ModuleCallHooks``
    whose methods ``pre`` and ``post`` are (a native bracket then calls it directly). Returns
    the undo step, to run when the capture ends."""
    owner = threading.get_ident()
    # Native brackets where the capture's hooks are native (the extension makes and records
    # them in one call); the Python bracket otherwise.
    native = _native_functions() if native_hooks is not None else None
    installed: List[Any] = []

    def remove() -> None:
        with _LOCK:
            _HOOKS_BY_THREAD.pop(owner, None)
            _release(installed)

    def install_one(module: torch.nn.Module) -> Any:
        # An installation holds its module, so its id cannot be another module's.
        installation = _INSTALLED.get(id(module))
        if installation is None:
            installation = _Installation(module)
            _INSTALLED[id(module)] = installation
        installation.users += 1
        return installation

    with _LOCK:
        try:
            if native is not None:
                # Modules with hooks of their own, or a Python installation, come back here.
                native.install_brackets(modules, _INSTALLED, _HOOKS_BY_THREAD, install_one, installed)
            else:
                for module in modules:
                    installed.append(install_one(module))
        except BaseException:
            # Nothing stays half-installed: what went in comes off before the error propagates.
            _release(installed)
            raise
        _HOOKS_BY_THREAD[owner] = (pre, post, native_hooks)
    return remove


def _release(installed: List[Any]) -> None:
    """One capture stops using these installations (called holding the lock); the last user of
    each takes it off. Where the native extension is present it walks the list, taking native
    brackets off itself (a capture without native hooks may share one another capture put on)
    and handing every ``_Installation`` to :func:`_release_one`."""
    native = _native_functions()
    if native is not None:
        native.release_brackets(installed, _INSTALLED, _release_one)
    else:
        for installation in installed:
            _release_one(installation)


def _release_one(installation: _Installation) -> None:
    installation.users -= 1
    if installation.users == 0:
        _uninstall(installation)


def _uninstall(installation: _Installation) -> None:
    """Takes the hooks off, or gives the module back what its ``__dict__`` held, unless something
    replaced the bracket since (then that stays)."""
    module = installation.module
    del _INSTALLED[id(module)]
    for handle in installation.handles:
        handle.remove()
    if installation.bracket is None:
        return
    own = module.__dict__
    if own.get("forward") is not installation.bracket:
        return
    if installation.previous is _NOTHING:
        del own["forward"]
    else:
        own["forward"] = installation.previous


def installed_count() -> int:
    """How many modules carry a bracket or the capture's prepended hooks now (zero when no
    capture runs)."""
    with _LOCK:
        return len(_INSTALLED)
