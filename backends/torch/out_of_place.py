"""In-place ops run out of place, so the value they overwrite is kept without a copy.

A capture that saves every value holds each op's output as the model's own tensor. An in-place op
(``relu(x, inplace=True)``, ``x += y``) is about to overwrite one of them, so the plain way is to
copy the old value first and let the op write into the model's tensor: the copy reads and writes
the whole activation once more, which on resnet18 at batch 8 was all of the trace's time above a
plain forward (25 copies, ~75 MB). Run instead as its out-of-place twin, the op writes its result
into new memory and leaves the old value where it is; the model's tensor then takes the result's
storage (``Tensor.set_``), and the saved value keeps the old storage under a tensor of its own.
The model sees the same object with the same values, strides and dtype as after the in-place op.

Only ops whose twin computes exactly the same values are listed (elementwise arithmetic and
activations; no random op, no op whose twin means something else, as ``bernoulli_`` does). Whether
the swap is sound for a given tensor is the capture's decision (``Capture.run_in_place``)."""

from __future__ import annotations

from typing import Any, Optional

import torch

#: Functions whose ``inplace=True`` flag may be turned off (``F.relu(x, inplace=True)``): the
#: same function, ``inplace=False``, computes the same values into new memory.
KEYWORD_TWINS = frozenset(
    {
        "relu",
        "relu6",
        "hardtanh",
        "leaky_relu",
        "elu",
        "selu",
        "celu",
        "silu",
        "hardswish",
        "hardsigmoid",
        "mish",
        "_threshold",  # F.threshold
    }
)

#: In-place tensor methods (and the ``torch.`` functions of the same name) → the ``Tensor``
#: method that computes the same values out of place.
METHOD_TWINS = {
    "relu_": "relu",
    "add_": "add",
    "sub_": "sub",
    "mul_": "mul",
    "div_": "div",
    "clamp_": "clamp",
    "clamp_min_": "clamp_min",
    "clamp_max_": "clamp_max",
    "sigmoid_": "sigmoid",
    "tanh_": "tanh",
    "neg_": "neg",
    "abs_": "abs",
    "exp_": "exp",
    "sqrt_": "sqrt",
    "masked_fill_": "masked_fill",
    "__iadd__": "__add__",
    "__isub__": "__sub__",
    "__imul__": "__mul__",
    "__itruediv__": "__truediv__",
}

#: Torch names of the calls that share a tensor's memory with code TorchLens cannot follow: out
#: (a NumPy array, a DLPack capsule, a raw address, the storage object, memory shared with other
#: processes) or in (a tensor made over a NumPy array's or a buffer's memory, which the array
#: still sees). After one of them a capture stops swapping storage: something may still point at
#: the old memory. (``from_numpy``, ``frombuffer`` and ``from_dlpack`` do not reach a function
#: mode; their tensors are not op outputs, so they are never swapped anyway.)
MEMORY_EXPORTS = frozenset(
    {
        "numpy",
        "__array__",
        "__dlpack__",
        "to_dlpack",
        "data_ptr",
        "untyped_storage",
        "storage",
        "_typed_storage",
        "share_memory_",
        "as_tensor",
        "asarray",
        "from_numpy",
        "frombuffer",
        "from_dlpack",
    }
)


def run_out_of_place(func: Any, name: str, args: tuple, kwargs: dict) -> Optional[torch.Tensor]:
    """The in-place op ``func`` (named ``name``) computed out of place, or None when it has no
    listed twin or the twin did not return a plain tensor. Nothing the arguments hold changes."""
    if kwargs.get("inplace") is True:
        if name not in KEYWORD_TWINS:
            return None
        twin, twin_kwargs = func, {**kwargs, "inplace": False}
    else:
        twin_name = METHOD_TWINS.get(name)
        if twin_name is None:
            return None
        twin, twin_kwargs = getattr(torch.Tensor, twin_name), kwargs
    try:
        result = twin(*args, **twin_kwargs)
    except Exception:  # noqa: BLE001 - the op as written runs next and raises what it raises
        return None
    return result if type(result) is torch.Tensor else None


def takes_place_of(result: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether ``result`` can become ``target``'s value as the in-place op would have left it:
    same dtype, device, shape, strides and storage offset."""
    return (
        result.dtype == target.dtype
        and result.device == target.device
        and result.shape == target.shape
        and result.stride() == target.stride()
        and result.storage_offset() == target.storage_offset()
    )
