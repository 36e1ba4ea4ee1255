"""The context a job's forwards run in. A torch module runs without autograd (nothing is
differentiated, and the graph would hold every intermediate of the batch); other frameworks
have no global gradient state to switch off."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, ContextManager


def inference_context(model: Any) -> ContextManager[Any]:
    """``torch.no_grad()`` for a torch module, otherwise a context that does nothing. torch is
    looked up, never imported: a torch module can only exist once torch is loaded."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return torch.no_grad()
    return contextlib.nullcontext()
