"""Writes a .tlspec of a small real torch model with the torchlens Python package, for the
viewer's browser tests: nested modules, an image-like convolution output and a recurrent cell.

    .venv/bin/python host-web/browser-tests/write_torch_trace.py OUT.tlspec
"""

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
    print(f"wrote {path}: {len(trace.ops)} ops")


if __name__ == "__main__":
    main(sys.argv[1])
