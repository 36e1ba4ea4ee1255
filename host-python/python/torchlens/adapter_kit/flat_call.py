"""The traced call as a function of its arrays alone, which is what a framework that traces a
function to a program takes: a raw callable ``fn(params, *inputs)`` or a module root, split by
the framework's structure flattening into parameter leaves and input leaves (each named by its
path) and static leaves (numbers, strings, functions), with :meth:`FlatCall.flat` rebuilding the
call from the array leaves and running it."""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from ..argument_checks import short_repr
from ..errors import ArgumentError
from .argument_names import argument_names
from .program_cache import function_anchors
from .session import CaptureSession

#: A path through a structure: the framework's entries, each named by :meth:`FlatCall.entry_name`.
Path = Sequence[Any]


class FlatCall:
    """``call(params, inputs, kwargs)`` split into leaves. ``params`` and ``inputs`` list
    ``(name, value)`` of the dynamic leaves (parameters first, then inputs); ``flat(*dynamic)``
    rebuilds the call from them and runs it. A backend supplies the framework's structure
    functions (:meth:`flatten`, :meth:`unflatten`, :meth:`entry_name`, :meth:`is_dynamic`)."""

    def __init__(
        self,
        kind: str,
        params_tree: Any,
        inputs: tuple,
        kwargs: dict,
        call: Callable[[Any, tuple, dict], Any],
        input_names: List[str],
    ) -> None:
        #: The module identity mode the capture records (``function_root``, a module mode).
        self.kind = kind
        self.call = call
        self.class_name: Optional[str] = None
        #: The module library of a module root (None for a raw callable).
        self.framework: Optional[str] = None
        #: Module roots only: ``(address, module, container)`` of every module, the root first
        #: (address ``self``); every address a module is reachable under (by ``id``); each
        #: parameter's trainability by address (None: all trainable); and how an equation names
        #: the module scopes open around it (attributed roots).
        self.modules: List[Tuple[str, Any, bool]] = []
        self.reachable: Dict[int, List[str]] = {}
        self.trainable: Optional[Dict[str, bool]] = None
        self.scope_names: Optional[Callable[[Any], List[str]]] = None
        #: What the traced program depends on besides the leaves (see :mod:`.program_cache`):
        #: objects by identity (None: do not reuse a trace of this call) and a hashable structure.
        self.anchors: Optional[tuple] = None
        self.structure: Any = None
        with_path, self.treedef = self.flatten((params_tree, inputs, kwargs))
        self.leaves = [leaf for _, leaf in with_path]
        self.dynamic_index = [index for index, leaf in enumerate(self.leaves) if self.is_dynamic(leaf)]
        self.params: List[Tuple[str, Any]] = []
        self.inputs: List[Tuple[str, Any]] = []
        #: The positional argument each input leaf came from (None for keyword inputs).
        self.input_positions: List[Optional[int]] = []
        self.input_names = input_names
        for index in self.dynamic_index:
            path, leaf = with_path[index]
            group = self.entry_name(path[0])
            if group == "0":
                self.params.append((self.path_name(path[1:]), leaf))
            elif group == "1":
                position = int(self.entry_name(path[1]))
                self.inputs.append((input_names[position] + self._suffix(path[2:]), leaf))
                self.input_positions.append(position)
            else:
                self.inputs.append((self.entry_name(path[1]) + self._suffix(path[2:]), leaf))
                self.input_positions.append(None)

    @classmethod
    def of_function(cls, function: Callable[..., Any], args: tuple, kwargs: dict) -> FlatCall:
        """A raw callable ``fn(params, *inputs)``: with two or more positional arguments the
        first is the parameter structure; with one, it is the only input and there are no
        parameters. The function (with its closure and defaults) anchors its trace."""
        if len(args) >= 2:
            params, inputs = args[0], tuple(args[1:])
            names = argument_names(function, len(inputs), 1)
            call = cls("function_root", params, inputs, kwargs, lambda p, i, k: function(p, *i, **k), names)
        else:
            names = argument_names(function, len(args), 0)
            call = cls("function_root", None, tuple(args), kwargs, lambda p, i, k: function(*i, **k), names)
        call.class_name = getattr(function, "__name__", None) or type(function).__name__
        call.anchors = function_anchors(function)
        return call

    # ---- the framework's structures ------------------------------------------------------------

    def flatten(self, tree: Any) -> Tuple[List[Tuple[Path, Any]], Any]:
        """``([(path, leaf)], structure)`` of a nested structure."""
        raise NotImplementedError

    def unflatten(self, structure: Any, leaves: List[Any]) -> Any:
        raise NotImplementedError

    def entry_name(self, entry: Any) -> str:
        """The name of one path entry (a key, an attribute, an index)."""
        raise NotImplementedError

    def is_dynamic(self, leaf: Any) -> bool:
        """Whether a leaf is an array (traced); every other leaf is static."""
        raise NotImplementedError

    #: The types an output leaf may have (the framework's arrays, tracers and numbers); None:
    #: any leaf. Another leaf is refused before the framework reads it, with a typed error (the
    #: framework would say only that the flat call returned an invalid type).
    output_leaf_types: Optional[Tuple[type, ...]] = None

    def checked_output(self, output: Any) -> Any:
        """The call's output, checked before the framework reads it: every leaf of one of the
        :attr:`output_leaf_types`, else ``model_output_unsupported``."""
        if self.output_leaf_types is None:
            return output
        for _, leaf in self.flatten(output)[0]:
            if not isinstance(leaf, self.output_leaf_types):
                raise ArgumentError(
                    f"the model returned a {type(leaf).__name__} ({short_repr(leaf)}) among its outputs; "
                    "TorchLens records arrays",
                    "model_output_unsupported",
                    "return arrays (or a tuple, list or dict of arrays) from the traced function, and "
                    "keep other results out of it",
                )
        return output

    @staticmethod
    def input_argument(args: tuple, position: int, function_root: bool) -> Any:
        """The positional argument input ``position`` names (None when there is none): a raw
        callable ``fn(params, *inputs)`` given two or more arguments counts its inputs after the
        parameter structure (:meth:`of_function`); a module root's inputs are all its arguments."""
        index = position + (1 if function_root and len(args) >= 2 else 0)
        return args[index] if 0 <= position and index < len(args) else None

    def signature(self, abstract: Callable[[Any], Hashable], context: Hashable) -> Optional[tuple]:
        """The key of this call's trace in a :class:`~.program_cache.ProgramCache`: what a
        compiling framework keys its traces on, taken a little stricter. The anchors (by
        identity), the structure, every static leaf by value, each array leaf's ``abstract``
        value (shape, dtype, placement) and the framework's trace ``context``; None (trace every
        time) without anchors."""
        if self.anchors is None:
            return None
        dynamic = set(self.dynamic_index)
        statics = tuple(
            (index, type(leaf), leaf) for index, leaf in enumerate(self.leaves) if index not in dynamic
        )
        avals = tuple(abstract(self.leaves[index]) for index in self.dynamic_index)
        return (
            self.kind,
            self.framework,
            tuple(id(anchor) for anchor in self.anchors),
            self.structure,
            self.treedef,
            statics,
            avals,
            context,
        )

    # ---- modules ------------------------------------------------------------------------------

    def param_module(self, name: str) -> int:
        """The module owning parameter ``name``: the one whose address is its longest prefix
        (the root when none is)."""
        best, best_length = 0, -1
        for index, (address, _, _) in enumerate(self.modules):
            if address == "self":
                continue
            if (name == address or name.startswith(address + ".")) and len(address) > best_length:
                best, best_length = index, len(address)
        return best

    def param_trainable(self, name: str) -> bool:
        return True if self.trainable is None else self.trainable.get(name, True)

    def declare_modules(self, session: CaptureSession) -> None:
        """Declares every module but the root (declared by the pipeline), with its aliases."""
        for index, (address, module, container) in enumerate(self.modules):
            if address == "self":
                continue
            aliases = [other for other in self.reachable.get(id(module), []) if other != address]
            session.module(index, [address, *aliases], type(module).__name__, container, False)

    # ---- the call -------------------------------------------------------------------------------

    def path_name(self, path: Path) -> str:
        """``layers.0.weight`` for the path ``.layers[0].weight``."""
        return ".".join(self.entry_name(entry) for entry in path)

    def _suffix(self, path: Path) -> str:
        return "".join("." + self.entry_name(entry) for entry in path)

    @property
    def dynamic(self) -> List[Any]:
        """The array leaves, parameters first."""
        return [self.leaves[index] for index in self.dynamic_index]

    def rebuild(self, dynamic: List[Any]) -> Tuple[Any, tuple, dict]:
        """``(params, inputs, kwargs)`` with the array leaves replaced by ``dynamic``."""
        leaves = list(self.leaves)
        for index, value in zip(self.dynamic_index, dynamic):
            leaves[index] = value
        return self.unflatten(self.treedef, leaves)

    def flat(self, *dynamic: Any) -> Any:
        """The call on the array leaves ``dynamic``."""
        params, inputs, kwargs = self.rebuild(list(dynamic))
        return self.checked_output(self.call(params, inputs, kwargs))
