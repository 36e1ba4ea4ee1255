"""Activations over a whole dataset: ``tl.extract_dataset`` writes a folder of ``.tlspec`` shards
and an index, locally (default) or on Ray; ``tl.load_extraction`` reads it back as lazy per-op
arrays. The on-disk format is described in docs/extraction.md.

Nothing here imports a framework or Ray at ``import torchlens``: the engines import what they
need when a job runs."""

from __future__ import annotations

from .extract import extract_dataset
from .lazy import Column, Extraction, load_extraction
from .model_source import ModelFactory

__all__ = ["Column", "Extraction", "ModelFactory", "extract_dataset", "load_extraction"]
