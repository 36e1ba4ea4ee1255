"""How much tl.trace costs on torch models, against a plain forward pass and (optionally) the
reference implementation, in the same run.

    python benchmarks/torch_overhead.py [--reference-python PATH] [--repeats N]

For each model: plain forward, tl.trace saving every op, tl.trace with a narrow ``save=``; the
per-op overhead above the plain forward and the ratio to it. With ``--reference-python``, the
same models run under that interpreter's ``torchlens`` (the reference, 2.36.1, whose default
``trace`` saves every op) and the figures print side by side.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn as nn
from measurement import measure_in_reference_python, timed


def mlp() -> nn.Module:
    layers = []
    for _ in range(8):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(256, 10))


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class SmallTransformer(nn.Module):
    def __init__(self, dim: int = 64, blocks: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(1000, dim)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, 4, 4 * dim, batch_first=True, dropout=0.0) for _ in range(blocks)
        )
        self.head = nn.Linear(dim, 1000)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Chain(nn.Module):
    """Five hundred small steps (1000 ops): per-op cost without the fixed cost of a trace."""

    def forward(self, x):
        for _ in range(500):
            x = torch.relu(x) + 1
        return x


def models():
    import torchvision

    torch.manual_seed(0)
    return [
        ("mlp", mlp().eval(), torch.randn(32, 256)),
        ("small_cnn", SmallCnn().eval(), torch.randn(8, 3, 32, 32)),
        ("resnet18", torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 224, 224)),
        ("small_transformer", SmallTransformer().eval(), torch.randint(0, 1000, (2, 32))),
        ("chain_1000_ops", Chain(), torch.randn(4)),
    ]


def measure_ours(repeats: int) -> dict:
    import torchlens as tl

    results = {}
    for name, model, x in models():
        with torch.no_grad():
            plain = timed(lambda model=model, x=x: model(x), repeats)
            trace = tl.trace(model, x)
            full = timed(lambda model=model, x=x: tl.trace(model, x), repeats)
            narrow = timed(
                lambda model=model, x=x: tl.trace(model, x, save=tl.func("relu") | tl.func("linear")), repeats
            )
        results[name] = {"ops": len(trace), "plain": plain, "full": full, "narrow": narrow}
    return results


def measure_reference(repeats: int) -> dict:
    import torchlens as reference

    results = {}
    for name, model, x in models():
        with torch.no_grad():
            plain = timed(lambda model=model, x=x: model(x), repeats)
            ops = len(reference.trace(model, x).ops)
            full = timed(lambda model=model, x=x: reference.trace(model, x), max(1, repeats // 3))
        results[name] = {"ops": ops, "plain": plain, "full": full}
    return results


def report(ours: dict, reference: dict) -> None:
    header = (
        f"{'model':<18}{'ops':>6}{'plain ms':>10}{'full ms':>10}{'x plain':>9}{'µs/op':>8}{'narrow ms':>11}"
    )
    if reference:
        header += f"{'ref ops':>9}{'ref ms':>10}{'ref x':>8}{'ref µs/op':>11}{'speed-up/op':>13}"
    print(header)
    for name, row in ours.items():
        per_op = (row["full"] - row["plain"]) / row["ops"] * 1e6
        line = (
            f"{name:<18}{row['ops']:>6}{row['plain'] * 1e3:>10.2f}{row['full'] * 1e3:>10.2f}"
            f"{row['full'] / row['plain']:>9.2f}{per_op:>8.1f}{row['narrow'] * 1e3:>11.2f}"
        )
        if name in reference:
            ref = reference[name]
            ref_per_op = (ref["full"] - ref["plain"]) / ref["ops"] * 1e6
            line += (
                f"{ref['ops']:>9}{ref['full'] * 1e3:>10.1f}{ref['full'] / ref['plain']:>8.1f}"
                f"{ref_per_op:>11.1f}{ref_per_op / max(per_op, 1e-9):>13.1f}"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    if arguments.mode == "ours":
        print(json.dumps(measure_ours(arguments.repeats)))
        return
    if arguments.mode == "reference":
        print(json.dumps(measure_reference(arguments.repeats)))
        return
    reference = {}
    if arguments.reference_python:
        reference = measure_in_reference_python(arguments.reference_python, __file__, arguments.repeats)
    ours = measure_ours(arguments.repeats)
    print(f"torch {torch.__version__}, 1 thread, median of {arguments.repeats}")
    report(ours, reference)


if __name__ == "__main__":
    main()
