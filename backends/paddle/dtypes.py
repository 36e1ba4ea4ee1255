"""Paddle dtypes under the core's dtype names."""

from __future__ import annotations

import paddle

from torchlens.adapter_kit.dtype_names import DtypeNames

_NAMES = DtypeNames(paddle, {"float8_e4m3": "float8_e4m3fn"})

#: The core's name of a Paddle dtype (``paddle.float32`` → ``float32``).
neutral_name = _NAMES.core_name
#: The Paddle dtype of a core dtype name.
paddle_dtype = _NAMES.framework_dtype
