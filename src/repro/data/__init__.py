"""Datasets: the batches a run trains on, made once before the timed loop, and their record."""

from __future__ import annotations

import hashlib

import numpy as np

from repro.models.base import Batch, ModelEntry


def batches_sha256(batches: list[Batch]) -> str:
    h = hashlib.sha256()
    for x, y in batches:
        for a in (x, y):
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def make_batches(config: dict, entry: ModelEntry, dims: dict, seed: int) -> tuple[list[Batch], dict]:
    """The run's batches in NumPy (JAX layout) and what to record about where they came from."""
    data = config["data"]
    if data["name"] != "synthetic":
        raise ValueError(f"data={data['name']!r} is not available yet; valid: synthetic")
    rng = np.random.default_rng(seed)
    batch_size = config["run"]["batch_size"]
    batches = [entry.make_batch(dims, batch_size, rng) for _ in range(data["batches"])]
    record = {
        "name": "synthetic",
        "generator": "numpy.random.default_rng (PCG64)",
        "seed": seed,
        "batches": len(batches),
        "sha256": batches_sha256(batches),
    }
    return batches, record
