"""Writes a .tlspec of a small real torch model with the torchlens Python package, for the
viewer's browser tests: nested modules, an image-like convolution output and a recurrent cell,
and next to it ``<path>.json``: how many values it saved and whether it has a payload CRC-32
table.
With a second path it also writes the same model traced with ``save_grads=True`` after a
``loss.backward()`` (a file with a backward pass), and next to it ``<path>.json``: the grad_fn
labels and gradient edges the viewer must draw.

    .venv/bin/python host-web/browser-tests/write_torch_trace.py OUT.tlspec [BACKWARD.tlspec]
"""

import json
import struct
import sys

import torch

import torchlens as tl


class Cell(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.linear(x))


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
        )
        self.project = torch.nn.Linear(4 * 8 * 8, 16)
        self.cell = Cell()
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        h = self.features(x).flatten(1)
        h = self.project(h)
        for _ in range(2):
            h = self.cell(h)
        return self.head(h).softmax(-1)


def main(path):
    torch.manual_seed(0)
    model = SmallNet().eval()
    image = torch.randn(2, 1, 16, 16)
    trace = tl.trace(model, image)
    trace.save(path)
    # What the page must show, and whether the file ends with the payload CRC-32 table (the
    # viewer must not count it as a value).
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    expected = {"saved": len(trace.saved_ops), "crc_table": "__torchlens_payload_crc32__" in header}
    with open(f"{path}.json", "w", encoding="utf-8") as handle:
        json.dump(expected, handle)
    print(f"wrote {path}: {len(trace.ops)} ops")


def main_backward(path):
    torch.manual_seed(0)
    model = SmallNet().eval()
    trace = tl.trace(model, torch.randn(2, 1, 16, 16), save_grads=True)
    trace.output.square().sum().backward()
    trace.save(path)
    expected = {
        "labels": [node.label for node in trace.grad_fns],
        "edges": [list(edge) for edge in trace.backward_graph.edges],
        "saved_grads": len(trace.saved_grad_ops),
    }
    with open(f"{path}.json", "w", encoding="utf-8") as handle:
        json.dump(expected, handle)
    print(f"wrote {path}: {len(trace.grad_fns)} grad_fns")


if __name__ == "__main__":
    main(sys.argv[1])
    if len(sys.argv) > 2:
        main_backward(sys.argv[2])
