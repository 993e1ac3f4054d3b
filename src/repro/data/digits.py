"""The handwritten digits scikit-learn ships (1797 images, 8×8, 10 classes) as a DVC stage.

`python -m repro.data.digits prepare OUT_DIR` writes a seeded train/test split as .npy files
(byte-for-byte reproducible, unlike .npz whose zip entries carry timestamps). dvc.yaml runs
it; dvc.lock records each file's md5, which every run that reads the data checks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

FILES = ("train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy")
SPLIT_SEED = 0
TEST_FRACTION = 0.2


def prepare(out: Path, seed: int = SPLIT_SEED) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # [N, 8, 8, 1] in [0, 1]
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(len(y) * TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    out.mkdir(parents=True, exist_ok=True)
    for name, array in (("train_x", x[train]), ("train_y", y[train]), ("test_x", x[test]), ("test_y", y[test])):
        np.save(out / f"{name}.npy", array)


def load(folder: Path) -> dict[str, np.ndarray]:
    return {f.removesuffix(".npy"): np.load(folder / f) for f in FILES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=SPLIT_SEED)
    args = parser.parse_args()
    prepare(args.out, args.seed)


if __name__ == "__main__":
    main()
