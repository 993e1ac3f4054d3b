"""What the benchmarks that time repro's own step share: the workload built exactly as a repro
worker builds it, from a config's canonical dict, and the quantile they report spreads with."""

from __future__ import annotations


def build(raw: dict, cache_dir: str):
    """(workload, config, entry, dims, batches, seeds): `backend.build(BuildContext)` on the
    composed config `raw` (`schema.as_dict` of a preflight job), as worker/worker.py does it."""
    from repro import backends, models
    from repro.backends.base import BuildContext
    from repro.config import schema
    from repro.data import make_batches
    from repro.worker import seeding

    config = schema.from_dict(raw)
    seeds = seeding.derive(config.run.seed)
    entry = models.entry_of(config.model)
    dims = entry.dims_of(schema.dims(config.model))  # as worker/worker.py hands them
    batches = make_batches(config, entry, dims, seeds["data"])[0]
    ctx = BuildContext(config=config, entry=entry, dims=dims, seeds=seeds, batches=batches,
                       threads=seeding.resolve_threads(config.run.threads), cache_dir=cache_dir)
    return backends.load(config.framework.backend).build(ctx), config, entry, dims, batches, seeds


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]
