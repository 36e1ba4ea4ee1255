"""``tl.debug.infer_input_shape`` on torch: right on resnet18, a transformer encoder, an LSTM,
an MLP and an embedding model; refuses on what it cannot read, and on other frameworks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchlens as tl
from conformance.models.torch import Recurrent
from torchlens.errors import BackendUnsupportedError, UnsupportedError

pytestmark = pytest.mark.torch


def test_resnet18_takes_three_channel_images():
    import torchvision

    model = torchvision.models.resnet18()
    model.train()
    guess = tl.debug.infer_input_shape(model)
    assert guess.shape == (1, 3, 224, 224) and guess.dtype == torch.float32
    assert guess.source == "conv1" and "3 input channels" in guess.reason
    assert model.training  # the confirming forward ran in eval mode and restored the mode


def test_a_transformer_encoder_takes_embeddings():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    guess = tl.debug.infer_input_shape(model)
    assert guess.shape == (1, 8, 16) and guess.feature_axis == -1 and guess.batch_axis == 0
    sequence_first = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model=12, nhead=3), num_layers=1)
    assert tl.debug.infer_input_shape(sequence_first).shape == (8, 1, 12)


def test_an_lstm_and_an_mlp():
    assert tl.debug.infer_input_shape(Recurrent(5, 7, 2)).shape == (1, 8, 5)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    assert tl.debug.infer_input_shape(mlp).shape == (1, 6)
    model = nn.Sequential(nn.Linear(6, 8), nn.Flatten(0))  # still runs on (1, 6)
    assert tl.debug.infer_input_shape(model).shape == (1, 6)


def test_token_ids_for_an_embedding():
    model = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 2))
    guess = tl.debug.infer_input_shape(model)
    assert guess.shape == (1, 8) and guess.dtype == torch.long and guess.feature_axis is None


def test_it_refuses_what_it_cannot_read():
    with pytest.raises(UnsupportedError) as raised:
        tl.debug.infer_input_shape(nn.Sequential(nn.ReLU()))
    assert raised.value.code == "input_shape_unknown" and raised.value.remedy

    class NeedsTwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, mask):
            return self.fc(x) * mask

    with pytest.raises(UnsupportedError) as raised:
        tl.debug.infer_input_shape(NeedsTwoInputs())
    assert raised.value.code == "input_shape_unknown"


@pytest.mark.jax
def test_another_framework_refuses_with_a_registered_code():
    # A torch-only venv (make test-pins' torch leg) has no jax: skipped there, with its reason.
    jnp = pytest.importorskip("jax.numpy")

    with pytest.raises(BackendUnsupportedError) as raised:
        tl.debug.infer_input_shape(lambda x: jnp.tanh(x), backend="jax")
    assert raised.value.code == "capability_unsupported" and raised.value.framework == "jax"
