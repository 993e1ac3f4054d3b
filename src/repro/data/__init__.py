"""Datasets: the batches a run trains on, made once before the timed loop, and their record.

- synthetic: random inputs from the run's seed (its generator and seed are recorded);
- digits: the DVC-tracked split (each file's md5 is recorded and checked against dvc.lock).
Batches come in the JAX layout (NHWC images); non-image models get flattened features.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import hashlib
from pathlib import Path

from repro import paths
from repro.hashing import sha256_json
from repro.models.api import Batch, Model

if TYPE_CHECKING:
    import numpy as np

    from repro.config.schema import Config

# What each real dataset gives a model: per-example input shape (NHWC) and classes.
DATASETS = {"digits": {"shape": (8, 8, 1), "classes": 10, "module": "repro.data.digits"}}


class DataError(RuntimeError):
    pass


def batches_sha256(batches: list[Batch]) -> str:
    import numpy as np

    h = hashlib.sha256()
    for x, y in batches:
        for a in (x, y):
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def file_md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def data_folder(data) -> Path:
    return paths.repo_root() / data.path


def model_mismatch(data, entry: Model, dims: dict) -> str | None:
    """Why the model cannot read this dataset, or None."""
    if data.name not in DATASETS:
        return None
    spec = DATASETS[data.name]
    h, w, c = spec["shape"]
    want = {"classes": spec["classes"]}
    want.update({"image": h, "channels": c} if entry.image_input else {"in_dim": h * w * c})
    wrong = {k: v for k, v in want.items() if dims.get(k) != v}
    if not wrong:
        return None
    fix = " ".join(f"model.{k}={v}" for k, v in wrong.items())
    return f"data={data.name} gives {h}×{w}×{c} inputs and {spec['classes']} classes; set {fix}"


def _epoch_batches(x: np.ndarray, y: np.ndarray, batch_size: int, steps: int, rng) -> list[Batch]:
    per_epoch = len(y) // batch_size
    if per_epoch == 0:
        raise DataError(f"run.batch_size={batch_size} is larger than the training split ({len(y)} examples)")
    batches: list[Batch] = []
    while len(batches) < steps:
        order = rng.permutation(len(y))
        for b in range(per_epoch):
            idx = order[b * batch_size:(b + 1) * batch_size]
            batches.append((x[idx], y[idx]))
    return batches[:steps]


def make_batches(config: Config, entry: Model, dims: Any, seed: int) -> tuple[list[Batch], Batch | None, dict]:
    """The run's training batches, its evaluation set (or None) and the data record."""
    import numpy as np  # here, not at the top: a worker's first import of NumPy is its framework's (worker/worker.py)

    data, run = config.data, config.run
    rng = np.random.default_rng(seed)
    if data.name == "synthetic":
        batches = [entry.make_batch(dims, run.batch_size, rng) for _ in range(data.batches)]
        return batches, None, {"name": "synthetic", "generator": "numpy.random.default_rng (PCG64)",
                               "seed": seed, "batches": len(batches), "sha256": batches_sha256(batches)}
    import importlib

    module = importlib.import_module(DATASETS[data.name]["module"])
    folder = data_folder(data)
    md5 = {f"{data.path}/{f}": file_md5(folder / f) for f in module.FILES}
    arrays = module.load(folder)
    x_train, x_test = arrays["train_x"], arrays["test_x"]
    if not entry.image_input:
        x_train, x_test = x_train.reshape(len(x_train), -1), x_test.reshape(len(x_test), -1)
    most = run.max_steps if run.steps == "auto" else int(run.steps)  # run.steps=auto: as many as its window may take
    batches = _epoch_batches(x_train, arrays["train_y"], run.batch_size, most, rng)
    record = {"name": data.name, "md5": md5, "sha256": sha256_json(md5), "shuffle_seed": seed,
              "train": len(x_train), "test": len(x_test)}
    return batches, (x_test, arrays["test_y"]), record
