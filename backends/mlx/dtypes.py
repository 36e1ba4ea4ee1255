"""MLX dtypes under the core's dtype names."""

from __future__ import annotations

import mlx.core as mx

from torchlens.adapter_kit.dtype_names import DtypeNames

_NAMES = DtypeNames(mx, {"bool": "bool_"})

#: The core's name of an MLX dtype (``mlx.core.float32`` → ``float32``).
neutral_name = _NAMES.core_name
#: The MLX dtype of a core dtype name.
mlx_dtype = _NAMES.framework_dtype
