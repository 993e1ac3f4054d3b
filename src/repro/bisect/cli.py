"""`repro bisect GOOD BAD [--dry-run] [--budget-s S] [--max-rounds N] [overrides]`: the commit behind a slowdown.

GOOD and BAD are ledger records (ids or unique prefixes) of one workload on one hardware class.
Before anything runs, each refusal is one line and exit 2, nothing written: records of different
workloads or hardware, a record not ok, no difference between them, a commit missing from its
repository, a budget too small for the confirmation. Then:
1. what differs is printed: the commit range (repro's own tree, and a user model's repository that
   the records' `workload_source` names) before the first probe;
2. the confirmation: GOOD and BAD re-measured here in paired interleaved rounds until the verdict
   decides at a planned look (decide.confirm); a gap that does not reproduce ends it (exit 1);
3. the probes, each a verdict against GOOD in paired rounds (decide.classify), through the one sweep
   loop (probe.Probes; under `hydra/launcher=...` each round handed to that launcher's adapter, as a
   sweep's), the next position chosen by the posterior (search.Search) until one position
   holds 0.95, the history is non-monotone, or the budget is spent;
4. the result: the table of probes, the culprit line, a `bisect` ledger record (written as probes
   end: run the same command again to resume an interrupted one), a report folder (bisect.md,
   bisect.png) and MLflow (one parent run, a child per probe, through the hand-over queue).
Exit 0 when a culprit is named, 1 otherwise (not reproduced, undecided, non-monotone, a failed run).

`repro bisect --replay ID` rebuilds a bisection from its record alone: the posterior recomputed
from the recorded probes (which must name the recorded culprit), the table, the report folder
and the MLflow parent; nothing runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.bisect.candidates import BisectError
from repro.ledger.record import view

EXAMPLES = """examples:
  repro bisect 5581cc5c abea4f61                     name the commit between two runs that made it slower
  repro bisect 5581cc5c abea4f61 --dry-run           what differs and what the bisection would cost, nothing run
  repro bisect 5581cc5c abea4f61 --budget-s 1800 --max-rounds 8
  repro bisect 5581cc5c abea4f61 hydra/launcher=submitit_slurm hydra.launcher.partition=gpu
                                                     each paired round a SLURM job, as a sweep's
  repro bisect 5581cc5c abea4f61 run.steps=20        the recorded config with an override
  repro bisect --replay 9c1e0d2a                     a recorded bisection rebuilt from its record"""


def add_parser(sub, common) -> None:
    p = sub.add_parser("bisect", help="name the commit between two recorded runs that made the step slower "
                                      "(paired rounds per probe, a posterior over positions)",
                       parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("good", nargs="?", help="ledger id (or prefix) of the run that was fast")
    p.add_argument("bad", nargs="?", help="ledger id (or prefix) of the run that was slow")
    p.add_argument("overrides", nargs="*", help="Hydra-style overrides of the recorded config (key=value)")
    p.add_argument("--dry-run", action="store_true", help="print what differs and the estimate; run nothing")
    p.add_argument("--budget-s", type=float, default=None,
                   help="stop before a round that would pass this many seconds (and refuse a budget that cannot "
                        "hold the confirmation)")
    p.add_argument("--max-rounds", type=int, default=None,
                   help="the most paired rounds of one probe (default: the config's verdict.max_repeats)")
    p.add_argument("--replay", metavar="ID", help="rebuild a recorded bisection (its posterior, table, report, "
                                                  "MLflow) from its ledger record; nothing runs")
    p.add_argument("--wheelhouse", metavar="DIR", action="append", default=None,
                   help="where package versions come from, offline: a folder of wheels or a `repro env pack` folder "
                        "(repeatable; default: the records' env.wheelhouse, else the index)")
    p.add_argument("--tracking-uri", help="MLflow store for the bisection's runs (default: as for any run)")
    p.add_argument("--progress", default="plain", choices=("auto", "rich", "plain", "none"),
                   help="progress display, as progress.mode (default: plain)")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"repro bisect: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    from repro.config import ConfigError
    from repro.envs.venvs import EnvError
    from repro.ledger import Ledger, LedgerError

    ledger = Ledger(args.ledger)
    if args.replay:
        if args.good or args.bad or args.overrides:
            return _fail("--replay ID takes no GOOD, BAD or overrides: it rebuilds a recorded bisection")
        try:
            return replay(ledger, args.replay)
        except (LedgerError, BisectError) as e:
            return _fail(str(e))
    if not (args.good and args.bad):
        return _fail("give GOOD and BAD, two ledger ids (or prefixes) of runs of one config (repro ledger list), "
                     "or --replay ID")
    # where the probes' rounds run: `hydra/launcher=...` and `hydra.*`, as for a sweep (loop/rounds.py adapters)
    launch = [o for o in args.overrides if o.startswith(LAUNCH)]
    overrides = [o for o in args.overrides if not o.startswith(LAUNCH)]
    if (odd := [o for o in overrides if "=" not in o or o.startswith(("+", "~", "-"))]):
        return _fail(f"{odd[0]!r} is not an override of the recorded config (key=value, e.g. run.steps=20)")
    if args.max_rounds is not None and args.max_rounds < 2:
        return _fail(f"--max-rounds={args.max_rounds} must be at least 2 (a verdict needs two rounds)")
    if args.budget_s is not None and args.budget_s <= 0:
        return _fail(f"--budget-s={args.budget_s:g} must be positive (seconds)")
    try:
        plan = dataclasses.replace(prepare(ledger, args, overrides), launch=launch, composed=where_it_runs(launch))
    except (BisectError, LedgerError, ConfigError, EnvError) as e:
        return _fail(str(e))
    for line in plan.lines:
        print(line, flush=True)
    if args.dry_run:
        return 0
    return bisect(ledger, plan, args)


LAUNCH = ("hydra/launcher=", "hydra.")


def where_it_runs(launch: list[str]) -> tuple | None:
    """The composed launcher of `hydra/launcher=... hydra.launcher.*=...` (None: none given, this process);
    ConfigError naming the override where Hydra cannot compose it."""
    if not launch:
        return None
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from repro.api import launcher_node
    from repro.config import ConfigError

    from repro.loop import launchers

    try:
        return launcher_node(launch)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(f"{' '.join(launch)}: {str(e).splitlines()[0]} (hydra/launcher= takes "
                          f"{', '.join(r.name for r in launchers.registered())}, as a sweep does)") from None


def configured(record: dict, ledger_root: Path, overrides: list[str], tracking_uri: str | None, progress: str):
    """The recorded config with the overrides, into this ledger and MLflow store (ConfigError naming the key)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from repro import paths
    from repro.config import ConfigError
    from repro.config.schema import ProgressConfig, as_dict, from_dict

    data = record["config"]
    if overrides:
        try:
            merged = OmegaConf.merge(OmegaConf.create(data), OmegaConf.from_dotlist(overrides))
            data = OmegaConf.to_container(merged, resolve=True)
        except OmegaConfBaseException as e:
            raise ConfigError(f"the overrides {' '.join(overrides)} do not apply to the recorded config: "
                              f"{str(e).splitlines()[0]}") from None
        known = as_dict(view(record).config)  # a record older than a key has it at its default
        unknown = [o.split("=", 1)[0] for o in overrides if _missing(known, o.split("=", 1)[0])]
        if unknown:
            raise ConfigError(f"{unknown[0]} is not a key of the recorded config (repro ledger show "
                              f"{view(record).id[:8]} lists them)")
    try:
        config = from_dict(data)
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"the recorded config with {' '.join(overrides)} is not valid: {e}") from None
    config.ledger.dir = str(ledger_root)
    config.tracking.uri = tracking_uri or paths.default_tracking_uri()
    config.progress = ProgressConfig(mode=progress)
    return config


def _missing(tree: dict, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return True
        tree = tree[part]
    return False


def per_run_s(ledger_root: Path, good: dict) -> tuple[float | None, int]:
    """One run's estimated seconds from the ledger's past runs of the config on this hardware
    (preflight/estimate.py, as a sweep's), with how many runs it is the median of."""
    from repro.preflight import estimate

    chash = view(good).config_hash
    past = estimate.history(ledger_root, {chash}, estimate.hardware_here()).get(chash, [])
    cost = estimate.cost(chash, 1, past)
    return cost.per_run_s, cost.past


@dataclass(frozen=True)
class Plan:
    """A bisection checked before it runs (`prepare`): its endpoints' records, the walk between them, the
    config its runs take, what it may spend, the lines printed, and where its rounds run."""

    good: dict
    bad: dict
    walk: Any  # candidates.Walk
    config: Any  # config.schema.Config
    cap: int  # the most rounds of one call
    budget_s: float | None
    overrides: list[str]
    lines: list[str]
    round_s: float | None  # one paired round's estimated seconds (None: no history)
    wheelhouse: list[str]
    launch: list[str] = field(default_factory=list)  # hydra/launcher=... and hydra.* overrides
    composed: tuple | None = None  # their composed launcher (None: this process)


def prepare(ledger, args, overrides: list[str]) -> Plan:
    """Everything checked before a run: the endpoints, what differs, the config, the budget; the lines to print."""
    from repro.bisect import candidates, decide
    from repro.usertext import duration
    from repro.replay import refusal

    good, bad = candidates.endpoints(ledger, args.good, args.bad)
    wheelhouse = args.wheelhouse or [w for w in {view(r).config.env.wheelhouse for r in (good, bad)} if w]
    walk = candidates.path(ledger.root, good, bad, wheelhouse, log=print)
    config = configured(good, ledger.root, overrides, args.tracking_uri, args.progress)
    if why := refusal(config, as_recorded=True):  # the hardware profile against this machine
        raise BisectError(f"{view(good).id} cannot run here: {why}")
    from repro.preflight.verdict import check_bisect

    check_bisect(config.bisect)  # the recorded config's, with the overrides; a flag given replaces its key
    budget = args.budget_s if args.budget_s is not None else config.bisect.budget_s
    flag = "--budget-s" if args.budget_s is not None else "bisect.budget_s"
    cap = args.max_rounds or config.bisect.max_rounds or config.verdict.max_repeats
    looks = tuple(decide.looks(cap))
    first = looks[0] if looks else cap
    each, past = per_run_s(ledger.root, good)
    probes_lo = math.ceil(math.log2(max(walk.n, 2)))
    probes_hi = probes_lo + 2
    lines = [f"bisect: GOOD {view(good).id} → BAD {view(bad).id}: {walk.n + 1} positions (0: GOOD, {walk.n}: BAD)"]
    lines += walk.lines()
    runs_lo, runs_hi = 2 * first * (1 + probes_lo), 2 * cap * (1 + probes_hi)
    if each is None:
        cost = "no history of this config on this hardware: no estimate"
    else:
        cost = (f"about {duration(runs_lo * each)} to {duration(runs_hi * each)} ({duration(each)} a run, the median "
                f"of {past} past runs of this config on this hardware)")
        need = 2 * first * each
        if budget is not None and budget < need:
            raise BisectError(f"{flag} {budget:g} cannot hold the confirmation: its first look needs "
                              f"{2 * first} runs ({first} paired rounds of GOOD and BAD) of about {duration(each)} each, "
                              f"{duration(need)}; give {flag} {math.ceil(need * (1 + probes_hi)) } or more")
    lines.append(f"plan: the confirmation ({first} to {cap} paired rounds), then about {probes_lo} to {probes_hi} "
                 f"probes of {first} to {cap} rounds each against GOOD: {runs_lo} to {runs_hi} runs, {cost}"
                 + (f"; budget {duration(budget)} ({flag})" if budget else ""))
    if not args.dry_run:
        from repro.bisect.probe import check_places

        check_places(walk, good, wheelhouse)  # every position's code made (cached worktrees) before the first run
    return Plan(good=good, bad=bad, walk=walk, config=config, cap=cap, budget_s=budget, overrides=overrides,
                lines=lines, round_s=2 * each if each else None, wheelhouse=wheelhouse)


def bisect(ledger, plan: Plan, args) -> int:
    from repro import report as views
    from repro.bisect import record as records
    from repro.bisect import report
    from repro.bisect.probe import Probes
    from repro.loop import sweep
    from repro.session import Session
    from repro.worker import lifeline

    console = views.console()

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    good, bad, walk, config = plan.good, plan.bad, plan.walk, plan.config
    key = records.key_of(view(good).id, view(bad).id, plan.overrides)
    head = records.resumable(ledger, key)
    if head is None and (done := [view(r) for r in ledger.heads(kind=records.KIND) if view(r).bisect.key == key]):
        say(f"bisection {done[-1].id} of these endpoints ended {done[-1].status!r}; this one starts afresh "
            f"(repro bisect --replay {done[-1].id[:12]} shows that one)")
    state = records.Bisection(ledger, good, bad, walk, plan.overrides, plan.cap, plan.budget_s, say, head)
    if head:
        done, was = len(state.probes), view(head)
        say(f"resuming bisection {was.id} ({was.status}): the confirmation"
            f"{' and ' + str(done) + ' probe' + 's' * (done != 1) if done else ''} recorded, not run again"
            if state.confirmation else f"resuming bisection {was.id}: nothing finished yet")
    lifeline.interrupt_on_signals()  # SIGTERM ends it as Ctrl-C does: recorded, resumable
    session = Session(config, multirun=True)
    session.swept = []
    policy = Probes(state, config, plan.overrides, session, plan.cap, plan.budget_s, say, plan.round_s,
                    plan.wheelhouse)
    if policy.position is not None:
        from repro.api import launcher_from

        launcher = launcher_from(session, plan.launch, plan.composed)  # the rounds' place: a sweep's adapters
        try:
            sweep.run(session, policy, sweep.order_seed(session.sweep_id), config.verdict.max_reruns, launcher)
        except KeyboardInterrupt:
            print(f"repro bisect: interrupted; recorded in {view(state.head).id if state.head else 'no record'}: "
                  f"run the same command again to resume", file=sys.stderr)
            return 130
    else:
        state.ended(session, None, state.spent_before)
    return show(ledger, state.head, console, config.tracking.writer_idle_s)


def show(ledger, head: dict, console, writer_idle_s: float) -> int:
    """The table, the result line, the report folder and the MLflow hand-over of a bisection's record
    (`writer_idle_s`: tracking.writer_idle_s, handoff.start_projector)."""
    from repro.bisect import report
    from repro.tracking import handoff

    report.print_table(console, head)
    console.print(report.result_line(head), markup=False, highlight=False)
    rec = view(head)
    folder = report.default_dir(ledger.root, rec.bisect.key)
    page = report.write(head, folder)
    console.print(f"report: {page} and {folder / report.PLOT}", markup=False, highlight=False)
    console.print(f"ledger: bisect record {rec.id} ({rec.status}); repro bisect --replay {rec.id[:12]} "
                  "rebuilds it", markup=False, highlight=False)
    try:
        handoff.add_bisect(ledger.root, rec.id, {"report_dir": str(folder)})
        handoff.start_projector(ledger.root, writer_idle_s=writer_idle_s)
    except OSError as e:
        console.print(f"MLflow: the bisection could not be handed over ({e}); `repro sync` puts it into MLflow",
                      markup=False, highlight=False)
    return 0 if rec.status == "decided" else 1


def replay(ledger, record_id: str) -> int:
    """A recorded bisection rebuilt from its record: the posterior again from its probes."""
    from repro import report as views
    from repro.bisect import search

    head = ledger.current(ledger.get(record_id))
    rec = view(head)
    if rec.kind != "bisect":
        raise BisectError(f"record {rec.id} is a {rec.kind!r} record, not a bisection: give the id "
                          "`repro bisect` printed")
    b = rec.bisect
    rates = search.Rates(**b.rates)
    probes = [search.Probe.from_dict({k: v for k, v in p.items() if k != "label"}) for p in head["bisect"].get("probes") or []]
    again = search.Search.replay(b.n, rates, probes)
    recorded = b.culprit.position if b.culprit else None
    now = (again.decided() or (None,))[0]
    console = views.console()
    same = "the same" if recorded == now else f"NOT the recorded {recorded}"
    console.print(f"replayed bisection {rec.id} from its record: {len(probes)} probes; the posterior from them "
                  f"names position {now} ({same})", markup=False, highlight=False)
    from repro.config.schema import TrackingConfig

    code = show(ledger, head, console, TrackingConfig.writer_idle_s)  # no config composed here: the schema's default
    return code if recorded == now else 1
