"""The command line a record was made by, rebuilt from its `overrides` alone: one run's
(MLflow's Source column) or a whole sweep's (the report's "Command")."""

from __future__ import annotations

from repro.ledger.record import view

PLACES = ("ledger.", "tracking.", "progress.", "hydra.", "hydra/")  # overrides that name places and display


def _kept(items: list[str], places: bool) -> list[str]:
    """Overrides, without those naming places and display (ledger.dir=/..., progress.mode) unless `places`."""
    return [o for o in items if places or "=" not in o or not o.lstrip("+~").startswith(PLACES)]


def command(record: dict, places: bool = True) -> str:
    """The command line of one run (`places=False`: without paths, for MLflow's Source column,
    which shows the last path component)."""
    return " ".join(["python -m repro", *_kept(list(view(record).overrides), places)])


def sweep_command(records: list[dict], places: bool = True) -> str:
    """The command that runs this sweep again: the overrides every job shares, then each swept
    key with its values in job order (rebuilt from the records alone)."""
    ordered = sorted(records, key=lambda r: view(r).sweep.job)
    items = [_kept(list(view(r).overrides), places) for r in ordered]
    shared = [o for o in items[0] if all(o in other for other in items)] if items else []
    swept: dict[str, list[str]] = {}
    for r_items in items:
        for o in r_items:
            if o not in shared:
                key, _, val = o.partition("=")
                if val not in swept.setdefault(key, []):
                    swept[key].append(val)
    multirun = len(records) > 1 and not any(o.startswith("+exp=") for o in shared)
    args = (["-m"] if multirun else []) + shared + [f"{k}={','.join(v)}" for k, v in swept.items()]
    return " ".join(["python -m repro", *args])
