"""tinygrad dtypes under the core's dtype names (tinygrad names follow C: ``float``, ``long``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from tinygrad import dtypes

from torchlens.adapter_kit.dtype_names import DtypeNames

_NAMES = DtypeNames(dtypes, {"float8_e4m3": "fp8e4m3", "float8_e5m2": "fp8e5m2"})

#: The core's name of a tinygrad dtype (``dtypes.float`` → ``float32``).
neutral_name = _NAMES.core_name
#: The tinygrad dtype of a core dtype name.
tinygrad_dtype = _NAMES.framework_dtype


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype values of a core dtype name travel as (bit-carriers excluded)."""
    return np.dtype(name)


def is_weak(dtype: Any) -> bool:
    """Whether a dtype is one of tinygrad 0.14's weak literal dtypes (no storage)."""
    return dtype in getattr(dtypes, "weaks", ())
