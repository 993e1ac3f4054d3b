"""`repro` / `python -m repro`: run experiments (Hydra overrides) or a subcommand.

    python -m repro +exp=quickstart          a sweep (the exp sets hydra.mode: MULTIRUN)
    python -m repro framework=torch model=vit one run
    repro ledger list | show ID | verify      the ledger
    repro ledger diff A B                     what differs between two records
    repro replay ID... | --experiment NAME    re-run recorded runs, compare bit for bit
    repro compare ID ID...                    runs side by side, every difference besides the framework
    repro ir diff A B                         op counts of two runs' lowered IR (run.capture_ir=true)
    repro models [--json]                     the model zoo with sizes
    repro report --sweep ID | --experiment N  a sweep's report (markdown, CSV, plots) from the ledger

Every job of a sweep is composed and checked before the first one starts: a bad config
exits with code 2 having written nothing.
"""

from __future__ import annotations

import argparse
import sys

from repro import paths

SUBCOMMANDS = ("ledger", "models", "replay", "compare", "ir", "report")
# Hydra flags that print something instead of running: passed through unchecked.
HYDRA_INFO_FLAGS = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--shell-completion",
                    "-sc", "--version", "-p", "--package", "--resolve")
EXIT_CONFIG_ERROR = 2
EXIT_RUN_FAILED = 1


def run_experiment(argv: list[str]) -> int:
    from repro import sweep
    from repro.config import ConfigError, validate

    if not any(a.split("=")[0] in HYDRA_INFO_FLAGS for a in argv):
        try:
            sweep.PLAN = validate.plan(argv)
        except (ConfigError, FileNotFoundError) as e:
            message = str(e).split("\nConfig search path:")[0]
            print(f"repro: invalid config, nothing was run:\n  {message}", file=sys.stderr)
            return EXIT_CONFIG_ERROR
    from repro.app import hydra_main

    sys.argv = [sys.argv[0]] + argv
    try:
        hydra_main()
    except KeyboardInterrupt:
        records = sweep.Session.close_current(interrupted=True)
        print(f"repro: interrupted; {len(records)} job(s) recorded", file=sys.stderr)
        return 130
    records = sweep.Session.last_records
    return EXIT_RUN_FAILED if any(r["status"] in sweep.NOT_OK for r in records) else 0


def run_subcommand(argv: list[str]) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--ledger", default=str(paths.default_ledger_dir()),
                        help="the ledger folder (default: the repo's ledger/)")
    parser = argparse.ArgumentParser(prog="repro", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    from repro.ledger import cli as ledger_cli
    from repro import ir, replay
    from repro.report import compare, sweep_report
    from repro.models import cli as models_cli

    ledger_cli.add_parser(sub, common)
    models_cli.add_parser(sub, common)
    replay.add_parser(sub, common)
    compare.add_parser(sub, common)
    ir.add_parser(sub, common)
    sweep_report.add_parser(sub, common)
    args = parser.parse_args(argv)
    return args.func(args)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        sys.exit(run_subcommand(argv))
    sys.exit(run_experiment(argv))
