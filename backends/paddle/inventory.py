"""The op surface the Paddle capture wraps and denies, read from the installed Paddle, and the
snapshot of it that ships with the backend (``inventory.json``). A test compares the two, so a
Paddle upgrade that adds, removes or renames an operation fails until the snapshot is reviewed
and rewritten (``python -m torchlens.backends.paddle.inventory --write``).

* ``c_ops``: every public function of ``paddle._C_ops`` (Paddle's eager kernels; every Python
  API of Paddle ends in one of them), minus gradient kernels. Wrapped, except:
* ``c_ops_in_place``: names ending in ``_`` write into an argument: refused
  (``paddle_in_place_mutation``).
* ``c_ops_rng``: kernels that draw random numbers: refused (``rng_state_in_graph``), except
  ``dropout`` and ``rrelu`` called with ``is_test=True`` (eval mode: deterministic).
* ``tensor_ops``: ``paddle.Tensor`` methods implemented in C++ that compute a new tensor
  (operators, indexing, ``clone``): wrapped as ops.
* ``tensor_in_place``: ``paddle.Tensor`` methods that write into the tensor: refused.
* ``tensor_escapes``: methods that read a value into Python (``item``, ``numpy``, ``bool``):
  refused (``unwrapped_op_in_capture``)."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Dict, List

import paddle
from paddle import _C_ops

#: Random-number kernels of ``paddle._C_ops`` (the ones that exist in the installed Paddle).
RNG = frozenset(
    {
        "bernoulli",
        "binomial",
        "class_center_sample",
        "dropout",
        "dropout_nd",
        "fused_bias_dropout_residual_layer_norm",
        "fused_dropout_add",
        "gaussian",
        "gaussian_inplace",
        "graph_khop_sampler",
        "graph_sample_neighbors",
        "gumbel_softmax",
        "multinomial",
        "poisson",
        "randint",
        "random",
        "random_routing",
        "randperm",
        "rrelu",
        "shuffle_batch",
        "tdm_sampler",
        "top_p_sampling",
        "truncated_gaussian_random",
        "uniform",
        "uniform_inplace",
        "uniform_random_batch_size_like",
        "weighted_sample_neighbors",
    }
)

#: RNG kernels that are deterministic when their ``is_test`` argument (position 3) is true.
RNG_UNLESS_TEST = frozenset({"dropout", "rrelu"})

#: C++ ``paddle.Tensor`` methods that compute a new tensor.
TENSOR_OPS = (
    "__add__",
    "__div__",
    "__eq__",
    "__floordiv__",
    "__ge__",
    "__gt__",
    "__le__",
    "__lt__",
    "__matmul__",
    "__mod__",
    "__mul__",
    "__ne__",
    "__pow__",
    "__radd__",
    "__rdiv__",
    "__rfloordiv__",
    "__rmatmul__",
    "__rmod__",
    "__rmul__",
    "__rpow__",
    "__rsub__",
    "__rtruediv__",
    "__sub__",
    "__truediv__",
    "_getitem_dygraph",
    "clone",
    "contiguous",
    "detach",
)

#: ``paddle.Tensor`` methods that write into the tensor.
TENSOR_IN_PLACE = ("_setitem_dygraph", "copy_", "detach_", "set_value", "_inplace_assign")

#: ``paddle.Tensor`` methods that read a value into Python.
TENSOR_ESCAPES = (
    "__array__",
    "__bool__",
    "__complex__",
    "__float__",
    "__index__",
    "__int__",
    "__nonzero__",
    "item",
    "numpy",
    "tolist",
)

#: Methods that print a tensor: they read its value, but only to show it, so they run with the
#: wrappers passed through.
TENSOR_QUIET = ("__repr__", "__str__", "__format__")

SNAPSHOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inventory.json")


def _op_names() -> List[str]:
    return sorted(
        name
        for name in dir(_C_ops)
        if not name.startswith("_") and not re.search(r"_grad_?$", name) and callable(getattr(_C_ops, name))
    )


_live_cache: Dict[str, List[str]] = {}


def live() -> Dict[str, List[str]]:
    """The surface of the installed Paddle, grouped as the snapshot groups it (read once per
    process: the kernels are fixed when Paddle is built)."""
    if not _live_cache:
        _live_cache.update(_read_live())
    return {key: list(value) for key, value in _live_cache.items()}


def _read_live() -> Dict[str, List[str]]:
    names = _op_names()
    tensor = paddle.Tensor
    return {
        "c_ops": [name for name in names if not name.endswith("_") and name not in RNG],
        "c_ops_in_place": [name for name in names if name.endswith("_")],
        "c_ops_rng": [name for name in names if name in RNG],
        "tensor_ops": [name for name in TENSOR_OPS if hasattr(tensor, name)],
        "tensor_in_place": [name for name in TENSOR_IN_PLACE if hasattr(tensor, name)],
        "tensor_escapes": [name for name in TENSOR_ESCAPES if hasattr(tensor, name)],
    }


#: Modules whose copies of the kernels are not called in dygraph mode (PIR and decomposition).
_REBOUND_SKIPPED = (
    "paddle._pir_ops",
    "paddle.base.libpaddle",
    "paddle.decomposition",
    "paddle.incubate.autograd",
    "paddle.pir",
)

_rebound_cache: Dict[str, object] = {"modules": -1, "found": []}


def rebound() -> List[tuple]:
    """Where Paddle's Python modules hold a kernel of ``paddle._C_ops`` under their own name
    (``paddle.tensor.matmul`` is ``_C_ops.matmul`` itself): ``(module, attribute, kernel)``.
    Those are wrapped too. Rescanned when the set of loaded modules changed."""
    loaded = len(sys.modules)
    if _rebound_cache["modules"] == loaded:
        return _rebound_cache["found"]  # type: ignore[return-value]
    kernels = {id(getattr(_C_ops, name)): name for name in _op_names()}
    found = []
    for module_name, module in list(sys.modules.items()):
        if (
            module is None
            or module is _C_ops
            or not module_name.startswith("paddle")
            or module_name.startswith(_REBOUND_SKIPPED)
        ):
            continue
        for attribute, value in list(getattr(module, "__dict__", {}).items()):
            name = kernels.get(id(value))
            if name is not None:
                found.append((module, attribute, name))
    _rebound_cache["modules"] = loaded
    _rebound_cache["found"] = found
    return found


def snapshot() -> Dict[str, object]:
    """The shipped snapshot (``inventory.json``)."""
    with open(SNAPSHOT, encoding="utf-8") as handle:
        return json.load(handle)


def write() -> None:
    """Rewrites the snapshot from the installed Paddle."""
    record: Dict[str, object] = {"paddle": paddle.__version__, **live()}
    with open(SNAPSHOT, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
    else:
        print(json.dumps({key: len(value) for key, value in live().items()}))
