"""Guessing a torch module's input shape from its first layer (``tl.debug.infer_input_shape``):
the first module with parameters fixes the feature axis (a convolution's channels, a linear
layer's or recurrent layer's features, an attention layer's embedding), conventional sizes fill
the rest, and the guess is confirmed by running the model once on zeros of that shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import nn

from torchlens.errors import UnsupportedError

#: Spatial side tried for convolutions, most conventional first (ImageNet models expect 224;
#: small ones run on less).
SPATIAL_SIDES = (224, 64, 32, 16, 8)
#: Sequence length for recurrent, attention and embedding inputs.
SEQUENCE_LENGTH = 8


@dataclass(frozen=True)
class InputShapeGuess:
    """A proposed input: ``shape`` (as the model takes it), ``dtype``, ``feature_axis`` (the
    axis whose size was read from the layer; None for token ids), the ``batch_axis``, the
    layer it was read from (``source``, ``source_type``) and how (``reason``)."""

    shape: Tuple[int, ...]
    dtype: torch.dtype
    feature_axis: Optional[int]
    batch_axis: int
    source: str
    source_type: str
    reason: str


def infer_input_shape(model: nn.Module) -> InputShapeGuess:
    """The input shape ``model`` takes, guessed from its first layer and confirmed by one
    forward on zeros (under ``torch.no_grad`` and in eval mode, restored afterwards). Refuses
    with ``input_shape_unknown`` when the first layer does not tell, or no candidate runs."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"infer_input_shape takes a torch.nn.Module, got {type(model).__name__}")
    first = _first_layer(model)
    if first is None:
        raise _unknown("the model has no layer with parameters to read a shape from")
    address, layer = first
    candidates = list(_candidates(layer))
    if not candidates:
        raise _unknown(f"its first layer {address} ({type(layer).__name__}) does not fix an input shape")
    failures = []
    for shape, dtype, feature_axis, batch_axis, reason in candidates:
        error = _runs(model, shape, dtype)
        if error is None:
            return InputShapeGuess(
                shape, dtype, feature_axis, batch_axis, address, type(layer).__name__, reason
            )
        failures.append(f"{shape}: {error}")
    raise _unknown(
        f"no shape read from {address} ({type(layer).__name__}) runs the model: " + "; ".join(failures[:3])
    )


def _first_layer(model: nn.Module) -> Optional[Tuple[str, nn.Module]]:
    """The first module (in registration order) that owns parameters itself."""
    for address, module in model.named_modules():
        if any(True for _ in module.parameters(recurse=False)):
            return address or "self", module
    return None


def _candidates(layer: nn.Module):
    """(shape, dtype, feature axis, batch axis, reason) guesses for a first layer."""
    float_dtype = next(layer.parameters()).dtype
    if isinstance(layer, nn.modules.conv._ConvNd):
        dims = len(layer.kernel_size)
        for side in SPATIAL_SIDES:
            yield (
                (1, layer.in_channels) + (side,) * dims,
                float_dtype,
                1,
                0,
                f"{type(layer).__name__} has {layer.in_channels} input channels; spatial size {side}",
            )
    elif isinstance(layer, nn.Linear):
        reason = f"Linear takes {layer.in_features} features"
        yield (1, layer.in_features), float_dtype, -1, 0, reason
        yield (1, SEQUENCE_LENGTH, layer.in_features), float_dtype, -1, 0, reason + " (a sequence)"
    elif isinstance(layer, nn.RNNBase):
        reason = f"{type(layer).__name__} takes {layer.input_size} features per step"
        yield _sequence(layer.input_size, layer.batch_first, float_dtype, reason)
    elif isinstance(layer, nn.MultiheadAttention):
        reason = f"attention over {layer.embed_dim}-wide embeddings"
        yield _sequence(layer.embed_dim, layer.batch_first, float_dtype, reason)
    elif isinstance(layer, nn.Embedding):
        reason = f"Embedding of {layer.num_embeddings} token ids"
        yield (1, SEQUENCE_LENGTH), torch.long, None, 0, reason


def _sequence(width: int, batch_first: bool, dtype: torch.dtype, reason: str) -> tuple:
    """A sequence of ``width``-wide steps, laid out as the layer reads it."""
    if batch_first:
        return (1, SEQUENCE_LENGTH, width), dtype, -1, 0, reason + " (batch first)"
    return (SEQUENCE_LENGTH, 1, width), dtype, -1, 1, reason + " (sequence first)"


def _runs(model: nn.Module, shape: Tuple[int, ...], dtype: torch.dtype) -> Optional[str]:
    """None when ``model`` runs on zeros of ``shape``, else the error's first line."""
    device = next(model.parameters()).device
    training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(shape, dtype=dtype, device=device))
        return None
    except Exception as error:  # the candidate does not fit: try the next one
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    finally:
        model.train(training)


def _unknown(message: str) -> UnsupportedError:
    return UnsupportedError(
        f"cannot guess the input shape: {message}",
        "input_shape_unknown",
        "pass an example input yourself (tl.trace(model, x))",
    )
