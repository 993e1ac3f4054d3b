"""`repro` / `python -m repro`: run experiments (Hydra overrides) or a subcommand.

The first word decides: a registered subcommand (`repro ledger list`), `run` or a Hydra
override (`repro run`, `repro +exp=quickstart`) runs experiments, a flag of ours (`--help`,
`--version`, `--dry-run`, shell completion queries) is answered here, and any other bare word
is an unknown command. Every job of a sweep is composed and checked before the first one
starts: a bad config exits with code 2 having written nothing.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

from repro import paths
from repro.usertext import shown

# Each verb's module registers it through `add_parser(sub, common)`: one line each. The help page,
# the typo check and shell completion are generated from what they register; running a verb imports
# its module alone (the report's modules import NumPy: 0.2-0.3 s that `repro ledger list` has no use
# for). tests/test_cli.py checks that each module registers the verb it is listed under.
VERB_MODULES = {
    "ledger": "repro.ledger.cli",
    "models": "repro.models.cli",
    "replay": "repro.replay",
    "compare": "repro.report.compare",
    "ir": "repro.ir",
    "sync": "repro.tracking.sync",
    "report": "repro.report.sweep_report",
    "env": "repro.envs.cli",
    "calibrate": "repro.calibrate",
    "bisect": "repro.bisect.cli",
    "history": "repro.history.cli",
}
RUN_WORD = "run"  # `repro run [OVERRIDES]`: the explicit word for a run (bare `repro` prints help)
DRY_RUN = "--dry-run"
HELP_FLAGS = ("-h", "--help")
COMPLETION_FLAGS = ("-sc", "--shell-completion")
# Hydra flags that print something instead of running: passed through unchecked.
HYDRA_INFO_FLAGS = ("--hydra-help", "-c", "--cfg", "-i", "--info", *COMPLETION_FLAGS, "-p", "--package", "--resolve")
# What repro's worker may import, for `--version` (read from package metadata, nothing imported).
VERSIONED_PACKAGES = ("jax", "jaxlib", "flax", "optax", "torch", "torch-xla", "transformers", "mlflow",
                      "hydra-core", "omegaconf", "dvc", "numpy")
# Words that are not commands but that a person may try: what they meant.
FLAG_WORDS = {"help": "--help", "version": "--version"}
COMMAND_LIKE = re.compile(r"[A-Za-z_][\w-]*")  # a Hydra override always has '=' (or starts with + ~ -)
EXIT_CONFIG_ERROR = 2
EXIT_RUN_FAILED = 1

EXAMPLES = {  # a subcommand's `--help` examples, where its module gives no epilog of its own
    "ledger": """examples:
  repro ledger list                      the current state of every run
  repro ledger list --all --json         every record, superseded ones too, as JSON
  repro ledger show 5581cc5c             one record (an id prefix is enough)
  repro ledger verify                    recompute every record's content hash
  repro ledger diff 5581cc5c abea4f61    config, environment, data and results differences
  repro ledger list --ledger ~/other/ledger""",
    "models": """examples:
  repro models                           every model and preset: parameters and FLOPs
  repro models --json | jq '.[0]'""",
    "replay": """examples:
  repro replay 5581cc5c                  re-run one recorded run and compare it with the record
  repro replay --experiment quickstart   every run of the newest recorded quickstart sweep
  repro replay 5581cc5c --progress plain --tracking-uri sqlite:///$PWD/replay.db
  repro replay 5581cc5c --as-recorded    in the recorded code (git worktree) and packages (uv venv)""",
    "env": """examples:
  repro env list                         cached venvs and worktrees, with their sizes
  repro env show 3f2a9c                  an environment's lock (every distribution, pinned)
  repro env prune --older-than 30        remove those unused for 30 days (rebuilt when needed)""",
    "compare": """examples:
  repro compare 5581cc5c abea4f61        two runs side by side, every difference but the framework""",
    "ir": """examples:
  repro framework=jax run.capture_ir=true; repro framework=torch_xla run.capture_ir=true
  repro ir diff 5581cc5c abea4f61        op counts of the two lowered steps
  repro ir diff 5581cc5c abea4f61 --all  also the ops whose counts are equal""",
    "sync": """examples:
  repro sync                             every ledger run missing from its MLflow store, into it
  repro sync --tracking-uri http://mlflow:5000 --experiment quickstart   one store, one experiment
  repro sync --ledger ~/other/ledger     another ledger""",
    "report": """examples:
  repro report --experiment quickstart   the newest quickstart sweep's report (markdown, CSV, plots)
  repro report --sweep 20261123T104122Z --out /tmp/report   one sweep by id (a prefix is enough)""",
}

# The page of the manual (docs/, `make docs-serve`) that explains each command: the last line of its
# `--help`, and its entry in the generated command reference (docs/hooks/reference.py).
DOCS = {
    "ledger": "docs/explanation/ledger.md",
    "models": "docs/how-to/own-model.md",
    "replay": "docs/how-to/replay.md",
    "compare": "docs/how-to/reports.md",
    "ir": "docs/how-to/reports.md",
    "sync": "docs/how-to/reports.md",
    "report": "docs/how-to/reports.md",
    "env": "docs/how-to/gpu-offline.md",
    "calibrate": "docs/how-to/calibrate.md",
    "bisect": "docs/how-to/bisect.md",
    "history": "docs/how-to/history.md",
}
DOCS_HOME = "docs/index.md"  # `repro --help`'s page: the manual's front page (the tutorial is one click on)


def docs_line(page: str) -> str:
    return f"explained in: {page} (the manual: make docs-serve)"


def _die(message: str) -> int:
    print(f"repro: {shown(message)}", file=sys.stderr)
    return EXIT_CONFIG_ERROR


# ---- subcommands ---------------------------------------------------------------------------

def build_parser(verb: str | None = None) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """Every verb's parser, or (`verb`) that verb's alone: only its module is imported."""
    import importlib

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--ledger", default=str(paths.default_ledger_dir()),
                        help="the ledger folder (default: the repo's ledger/)")
    parser = argparse.ArgumentParser(prog="repro", add_help=False)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in [VERB_MODULES[verb]] if verb else dict.fromkeys(VERB_MODULES.values()):
        importlib.import_module(module).add_parser(sub, common)
    for name, p in sub.choices.items():
        if p.epilog is None and name in EXAMPLES:
            p.epilog = EXAMPLES[name]
        for each in [p] + [c for a in p._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices.values()]:
            if name in DOCS:  # `repro ledger list --help` too
                each.epilog = f"{each.epilog}\n\n{docs_line(DOCS[name])}" if each.epilog else docs_line(DOCS[name])
        p.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser, sub


def _descriptions(sub: argparse._SubParsersAction) -> dict[str, str]:
    return {a.dest: a.help or "" for a in sub._choices_actions}


def run_subcommand(argv: list[str], parser: argparse.ArgumentParser | None = None) -> int:
    parser = parser or build_parser()[0]
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse takes a command's key=value overrides only before its first option; after one, too
        if isinstance(getattr(args, "overrides", None), list) and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = [*args.overrides, *extra]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    ledger, default = getattr(args, "ledger", None), str(paths.default_ledger_dir())
    if ledger is None or not getattr(args, "reads_ledger", True):  # `repro ledger schema` reads none
        return args.func(args)
    from repro.ledger import place

    if (why := place.unusable(ledger, write=False)) is not None:  # a file, a symlink loop, /proc, unreadable
        return _die(f"--ledger {ledger} {why}")
    if not Path(ledger).is_dir():
        if ledger == default:
            return _die(f"the repo's ledger {ledger} does not exist yet: a run creates it "
                        "(`repro run`), or name another one with --ledger DIR")
        return _die(f"--ledger {ledger}: no such folder. Name an existing ledger folder (the one a run's "
                    f"ledger.dir wrote to), or leave --ledger out for the repo's {default}")
    return args.func(args)


def unknown_command(word: str, names: list[str]) -> int:
    if word in FLAG_WORDS:
        hint = f"did you mean 'repro {FLAG_WORDS[word]}'?"
    else:
        close = difflib.get_close_matches(word, names + [RUN_WORD], n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"the commands are: {', '.join(names)}"
    return _die(f"unknown command '{word}' — {hint}\n  `repro --help` lists the commands; an experiment is "
                f"`repro run [key=value ...]` (or overrides alone: `repro framework=torch`)")


# ---- help and version ----------------------------------------------------------------------

def _groups() -> dict[str, tuple[list[str], str | None]]:
    """conf/'s Hydra groups: their options, and the default chosen in config.yaml."""
    import yaml

    conf = paths.conf_dir()
    defaults = {}
    for entry in yaml.safe_load((conf / "config.yaml").read_text()).get("defaults", []):
        if isinstance(entry, dict):
            defaults.update({k: v for k, v in entry.items() if not k.startswith("override ")})
    return {d.name: (sorted(p.stem for p in d.glob("*.yaml")), defaults.get(d.name))
            for d in sorted(conf.iterdir()) if d.is_dir() and any(d.glob("*.yaml"))}  # not hydra/ (its subgroups)


def help_text() -> str:
    _, sub = build_parser()
    lines = [
        "usage: repro [run] [OVERRIDE ...] [-m] [--dry-run]     run experiments (Hydra overrides)",
        "       repro COMMAND [ARGS ...]                        ledger, replay, models, ...",
        "       repro -h | --help | --version | --hydra-help",
        "",
        "Declarative, exactly reproducible framework comparisons: every run in a fresh worker process,",
        "recorded in the ledger and MLflow.",
        "",
        "Run an experiment:",
        "  repro +exp=quickstart                  a whole sweep (the exp sets hydra.mode: MULTIRUN)",
        "  repro framework=torch model=vit        one run: choose an option of any group below",
        "  repro -m framework=jax,torch           a sweep from the command line (a,b: each value)",
        "  repro run                              the default run (the * options below); bare `repro` runs nothing",
        "  repro +exp=quickstart --dry-run        the planned jobs: swept values, config hash, where recorded",
        "",
        "Config groups (conf/; * the default):",
    ]
    for group, (options, default) in _groups().items():
        shown = ", ".join(f"{o}*" if o == default else o for o in options)
        lines.append(f"  {('+' if group == 'exp' else '') + group + '=':<13} {shown}")
    lines += [
        "  and keys: run.* (steps, warmup, batch_size, seed, ...), tracking.uri/experiment, ledger.dir,",
        "  progress.mode/interval_s, model.preset and any model dimension: `repro --cfg job` prints them all",
        "",
        "Commands:",
    ]
    for name, text in _descriptions(sub).items():
        lines.append(f"  {name:<13} {text}")
    lines += [
        "  `repro COMMAND --help` shows a command's options and examples.",
        "",
        "Hydra's own help (override grammar, --cfg, --info, --multirun): repro --hydra-help",
        'Shell completion (commands and config keys): eval "$(repro --shell-completion install=bash)"',
        "",
        docs_line(DOCS_HOME),
    ]
    return "\n".join(lines)


def version_text() -> str:
    from importlib import metadata

    from repro import __version__

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    lines = [f"repro {__version__} ({paths.src_dir() / 'repro'})", f"python {sys.version.split()[0]}"]
    lines += [f"{name} {version(name)}" for name in VERSIONED_PACKAGES]
    lines.append("(framework=torch_xla runs under its own interpreter: conf/framework/torch_xla.yaml)")
    return "\n".join(lines)


# ---- shell completion ----------------------------------------------------------------------

def _words(line: str) -> list[str]:
    """The words after the program name in bash's COMP_LINE, the last one being completed."""
    words = line.split()[1:]
    return words + [""] if not words or line.endswith(" ") else words


def complete(line: str) -> list[str] | None:
    """Words that complete `line` among subcommands and their arguments; None where the word
    is a Hydra override (Hydra completes those)."""
    words = _words(line)
    _, sub = build_parser()
    first, current = words[0], words[-1]
    if len(words) == 1:
        return [n for n in [*sub.choices, RUN_WORD] if n.startswith(current)]
    if first not in sub.choices:
        return None
    parser = sub.choices[first]
    for word in words[1:-1]:  # walk into nested subcommands (`ledger list`)
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if nested and word in nested[0].choices:
            parser = nested[0].choices[word]
    candidates = [s for a in parser._actions for s in a.option_strings]
    candidates += [c for a in parser._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices]
    return [c for c in candidates if c.startswith(current)]


def run_completion(argv: list[str]) -> int:
    """`-sc query=bash` (what Hydra's installed completion function calls): our words, then Hydra's."""
    line = os.environ.get("COMP_LINE", "")
    if argv[1:2] and argv[1].startswith("query="):
        ours = complete(line)
        if ours is not None:
            print(" ".join(ours))
            if len(_words(line)) > 1:
                return 0  # a subcommand's arguments: no config keys there
        # Hydra completes config keys of the words after the program name (and after `run`)
        os.environ["COMP_LINE"] = re.sub(rf"^(\S+)\s+{RUN_WORD}(\s|$)", r"\1 ", line)
    import contextlib
    import io

    from repro.app import hydra_main

    sys.argv = [sys.argv[0], *argv]
    hydra_out = io.StringIO()
    with contextlib.redirect_stdout(hydra_out):
        hydra_main()
    print(_plus_groups(hydra_out.getvalue()) if argv[1:2] and argv[1].startswith("query=") else hydra_out.getvalue(),
          end="")
    return 0


def _plus_groups(words: str) -> str:
    """Hydra offers `exp=` for a group that is not in the defaults list, where only `+exp=` works."""
    added = {f"{group}=" for group, (_, default) in _groups().items() if default is None}
    return re.sub(r"(?<!\S)[\w-]+=(?!\S)", lambda m: f"+{m[0]}" if m[0] in added else m[0], words)


# ---- experiments ---------------------------------------------------------------------------

def _checked_plan(argv: list[str]):
    """Every job of the command line composed and checked (preflight.plan), or None having said why."""
    from repro.config import ConfigError
    from repro import preflight

    try:
        return preflight.plan(argv)
    except (ConfigError, FileNotFoundError) as e:
        _die(f"invalid config, nothing was run:\n  {e}")
        return None


def dry_run(argv: list[str]) -> int:
    """Compose and check the whole sweep; print one line per config (its runs, swept values, run
    name, config hash and estimated seconds a run: preflight/estimate.py) and the sweep's estimate;
    run and write nothing. A sweep verdict.budget_s cannot hold is refused as a run of it would be."""
    from repro.config import config_hash
    from repro.config.schema import as_dict
    from repro.preflight import estimate
    from repro.report import varied

    plan = _checked_plan(argv)
    if plan is None:
        return EXIT_CONFIG_ERROR
    est = estimate.of(plan)
    configs = plan.configs
    k, auto = len(configs), est.auto
    shape = f"{k} configs, run.repeats=auto (up to {est.rounds} runs each)" if auto else \
        f"{k} configs × {plan.repeats} runs = {plan.runs} jobs" if k > 1 and plan.repeats > 1 else \
        f"{plan.runs} job{'s' * (plan.runs != 1)}"
    print(f"repro --dry-run: {shape}, checked; nothing run or written")
    wheres = [(f"ledger {c.ledger.dir}", f"mlflow {c.tracking.uri} (experiment {c.tracking.experiment})")
              for c, _ in configs]
    shared = [i for i in (0, 1) if len({w[i] for w in wheres}) == 1]
    for i in shared:
        print(shown(wheres[0][i]))
    width = len(str(k))
    jobs = [{"config": as_dict(c), "overrides": list(o)} for c, o in configs]
    swept, keys = varied.swept_keys(jobs), varied.name_keys(jobs)
    runs = f"auto ≤{est.rounds}" if auto else f"×{plan.repeats}"
    for i, ((config, _), job, cost) in enumerate(zip(configs, jobs, est.configs)):
        values = varied.override_values(job)
        each = f"{estimate.duration(cost.per_run_s)}/run" if cost.parts else "no history"
        fields = [' '.join(f'{key}={v}' for key, v in values.items() if key in swept or k == 1) or '(defaults)',
                  varied.run_name(job, keys), f"config {config_hash(as_dict(config))[:12]}", runs, each,
                  *(w for j, w in enumerate(wheres[i]) if j not in shared)]
        print(shown(f"[{i + 1:>{width}}/{k}] {' · '.join(fields)}"))
        if config.hardware.platform != "cpu":  # what its worker will run with, where it differs by framework
            print(f"{'':>{2 * width + 4}}determinism: {_planned_determinism(config)}")
    print(est.summary())
    if parts := est.parts_s():
        print("  by part: " + " · ".join(f"{p.replace('_', ' ')} {estimate.duration(s)}"
                                         for p, s in estimate.ordered(parts) if s >= 0.05))
    if note := est.rerun_note():
        print(f"  {note}")
    if (why := est.refusal()) is not None:
        return _die(f"nothing would run: {why}")
    return 0


def _planned_determinism(config) -> str:
    from repro.backends import capabilities, determinism
    from repro.worker import seeding

    return determinism.planned(capabilities.of(config.framework.backend).xla, config.run.deterministic,
                               config.hardware.platform,
                               {"XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), **seeding.worker_env(config)})


def _interrupted(recorded: int) -> None:
    print(f"repro: interrupted; {recorded} job(s) recorded in the ledger; `repro sync` puts any run "
          "not yet in MLflow there", file=sys.stderr)


def run_experiment(argv: list[str]) -> int:
    """A sweep (or one run) from the command line, in the snapshot of the code and conf/ taken now
    (job/snapshot.py: whatever is edited meanwhile); the process is as it was afterwards."""
    from contextlib import nullcontext

    from repro.job import snapshot

    info_only = any(a.split("=")[0] in HYDRA_INFO_FLAGS for a in argv)
    try:
        snap = None if info_only else snapshot.take()
    except snapshot.SnapshotError as e:
        return _die(f"nothing was run: {e}")
    with nullcontext() if snap is None else snapshot.running(snap):
        return _run_experiment(argv, info_only)


def _run_experiment(argv: list[str], info_only: bool) -> int:
    """Hydra's own info flags (--cfg, --info, --hydra-help, ...) print through Hydra; every run, whatever
    the launcher, goes through the sweep loop (`api.run_jobs`), from the configs the preflight composed:
    Hydra composes, the loop decides, the launcher's adapter runs each round (loop/rounds.py)."""
    if info_only:
        from repro.app import hydra_main

        sys.argv = [sys.argv[0]] + argv
        hydra_main()
        return 0
    from repro.job.warm import WarmStart

    warm = WarmStart()
    warm.before_plan(argv)  # the worker this command line's single run had last time, while it is planned
    try:
        plan = _checked_plan(argv)
    except BaseException:
        warm.discard()
        raise
    if plan is None:
        warm.discard()
        return EXIT_CONFIG_ERROR
    warm.ahead_of_session(plan)  # a single run's worker, if not started already: now, while the session is made
    from repro.api import admit, launcher_for, plan_session, run_jobs
    from repro.config import ConfigError
    from repro.ledger import LedgerError

    try:  # verdict.budget_s against the ledger's estimate; a sweep's first line says its cost
        admit(plan)
        session = plan_session(plan, warm)
        launcher = launcher_for(plan, session, argv)  # a SLURM round past its time limit is refused here
    except ConfigError as e:
        warm.discard()
        return _die(f"nothing was run: {e}")
    from repro.worker import lifeline

    sys.argv = [sys.argv[0]] + argv
    lifeline.interrupt_on_signals()  # SIGTERM ends a sweep as Ctrl-C does: recorded, closed
    try:
        run_jobs(plan, session, launcher)
    except KeyboardInterrupt:  # run_jobs closed the session, interrupted
        _interrupted(len(session.records))
        return 130
    except LedgerError as e:  # the ledger refused a record (a full disk, read-only): closed, said once
        print(f"repro: the sweep stopped: {shown(str(e))}; {len(session.records)} job(s) ended before it. A "
              "result the ledger could not take stays in its spool: once the ledger can be written, `repro "
              "ledger recover` appends it and `repro sync` puts it into MLflow", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_RUN_FAILED if session.failed_any else 0


def dispatch(argv: list[str]) -> int:
    if not argv:
        print(help_text())
        return 0
    first = argv[0]
    if first in COMPLETION_FLAGS:
        return run_completion(argv)
    if COMMAND_LIKE.fullmatch(first) and first != RUN_WORD:
        if first in VERB_MODULES:
            return run_subcommand(argv, build_parser(first)[0])
        return unknown_command(first, list(VERB_MODULES))
    argv = argv[1:] if first == RUN_WORD else argv
    if "--version" in argv:
        print(version_text())
        return 0
    if any(a in HELP_FLAGS for a in argv):
        print(help_text())
        return 0
    try:  # --config-dir DIR: Hydra's flag, as one hydra.searchpath override (preflight/search.py)
        from repro.preflight import search

        argv = search.normalise(argv)
    except ValueError as e:
        return _die(f"invalid config, nothing was run:\n  {e}")
    if DRY_RUN in argv:
        return dry_run([a for a in argv if a != DRY_RUN])
    return run_experiment(argv)


def main(argv: list[str] | None = None) -> None:
    """The `repro` command (and `python -m repro`): once the command has returned, its output is
    flushed and the process ends without the interpreter's teardown, which took 0.06-0.18 s of
    the command's wall on the 2-core reference machine after everything was written (the ledger
    fsynced, the run's temp folder removed, the MLflow projector in its own process). An
    exception or SystemExit ends the usual way."""
    from repro.console import guard_streams

    guard_streams()
    code = dispatch(list(sys.argv[1:] if argv is None else argv))
    if _end_joblib_workers():
        sys.exit(code)
    if launch := sys.modules.get("repro.job.launch"):  # its last worker's end, not waited for until now
        try:
            launch.settle()
        except KeyboardInterrupt:  # everything is recorded and said: the worker, already exiting, ends alone
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _end_joblib_workers() -> bool:
    """hydra/launcher=joblib leaves loky's reusable worker processes waiting for more work (300 s
    idle, holding the command's stdout and their framework's memory): they are ended here. True
    where they were: the interpreter's teardown then releases loky's semaphores (`os._exit` would
    leave them to its resource tracker, which warns of leaked semlocks)."""
    # loky's module global, not get_reusable_executor(): that would start an executor where none ran
    executor = getattr(sys.modules.get("joblib.externals.loky.reusable_executor"), "_executor", None)
    if executor is None:
        return False
    executor.shutdown(wait=True, kill_workers=True)
    return True
