"""The `run` stage of dvc.yaml: one repro run from DVC's composed params.yaml.

With `hydra.enabled` in .dvc/config, `dvc exp run -S framework=torch` composes conf/ (with
the override) into params.yaml; this stage checks that config exactly as `python -m repro`
would and runs it through the same job path, into the same ledger and MLflow store.
"""

from __future__ import annotations

import sys

import yaml
from omegaconf import OmegaConf

from repro.config import ConfigError
from repro import preflight
from repro.preflight.verdict import check_plan


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else "params.yaml"
    with open(path) as f:
        params = yaml.safe_load(f)
    params.pop("hydra", None)
    try:
        config = preflight.check(OmegaConf.create(params))
        from repro import hardware

        hardware.check_all([config.hardware])
        preflight.check_data([config])
        repeats = check_plan((config,))  # run.repeats=auto on one config: once
    except ConfigError as e:
        print(f"repro: invalid config in {path}, nothing was run:\n  {e}", file=sys.stderr)
        return 2
    from repro.api import run_plan

    records = run_plan(preflight.Plan(multirun=False, jobs=(config,), overrides=((f"dvc:{path}",),), repeats=repeats))
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
