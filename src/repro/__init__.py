"""repro: declarative, exactly reproducible deep-learning framework comparisons.

    import repro
    record = repro.run(framework="jax", model="mlp", **{"run.steps": 10})
    records = repro.sweep("quickstart")
    repro.compare(experiment="quickstart")     # its comparison: one row per config (a DataFrame)
    repro.verdict([[...], ...], [[...], ...])  # two configs' runs (step times, s): faster, equivalent, or not yet
    repro.write_report(experiment="quickstart")  # its report, written now: the path of report.md
    repro.Ledger().heads()                     # the repo's ledger/ (the CLI's), or Ledger(DIR)

Importing `repro` is cheap on purpose (no framework, no MLflow, not even Hydra): the names
below are imported on first use, the worker process imports only its own framework, and the
parent imports MLflow once per sweep.
"""

__version__ = "0.1.0"

# The public API, name by name: where each lives (imported when first used).
_EXPORTS = {
    "run": "repro.api",
    "sweep": "repro.api",
    "compare": "repro.api",
    "verdict": "repro.report.verdict",  # repro.verdict(a_runs, b_runs, band=0.02): the views' Verdict
    "write_report": "repro.api",  # not "report": that is the repro.report package
    "Ledger": "repro.ledger",
    "LedgerError": "repro.ledger",
    "ConfigError": "repro.config",
    "Model": "repro.models.api",  # the model protocol: subclass it for a model of your own
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'repro' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(_EXPORTS[name])
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
