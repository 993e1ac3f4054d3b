"""Replay recorded runs and say whether they came out the same.

Before running: what differs now from the record (packages, hardware, threads, code, data).
Then the recorded resolved config through the same path (`run_job`, a fresh worker). After:
deterministic outputs bit for bit, losses within a tolerance, timings as ratios.

Verdicts: exact (loss trajectory and parameters bitwise equal), close (every loss within
LOSS_RTOL), differs (what and where), not-comparable (why). The verdict is a new ledger
record (kind "replay") naming the original and the replay's own run record.
"""

from __future__ import annotations

import copy
import math
import sys
import os
import dataclasses
from dataclasses import dataclass

from rich.console import Console

from repro import hardware, paths, report
from repro.config import config_hash
from repro.config.schema import Config, ProgressConfig, as_dict
from repro.envs import cache as envcache, lock
from repro.envs.venvs import EnvError
from repro.ledger import Ledger, LedgerError
from repro.ledger import render
from repro.ledger.diff import diff
from repro.ledger.record import RecordError, Timing, view
from repro.envs import workload_source
from repro.job import scheduler
from repro.worker import envcapture, seeding, window
from repro.loop.sweep import Job, Policy
from repro.usertext import markup

LOSS_RTOL = 1e-4  # "close": every step's loss within this relative difference
TIMING_TOLERANCE = 0.25  # timings "agree" when new/old is within 1 ± this
TIMINGS = ("first_step_s", "second_step_s", "steady_median_s")


@dataclass
class Verdict:
    status: str  # exact | close | differs | not-comparable
    reasons: list[str]


def environment_now(config: Config, lock_text: str | None = None) -> dict:
    """What can be known of the environment without importing a framework. `lock_text`: the
    whole environment the worker will run in, compared when the record names its own."""
    return {
        "packages": lock.versions(lock_text) if lock_text else envcapture.package_versions(),
        "cpu": {"model": hardware.cpu_model(), "affinity": len(os.sched_getaffinity(0)),
                "isa": list(hardware.cpu_isa())},
        "gpus": [g["name"] for g in hardware.accelerators()],
        "threads": seeding.resolve_threads(config.run.threads),
    }


def environment_then(record: dict, lock_text: str | None = None) -> dict:
    env = view(record).environment
    return {
        "packages": lock.versions(lock_text) if lock_text else env.packages,
        "cpu": {k: env.cpu.get(k) for k in ("model", "affinity", "isa")},  # isa: None before it was recorded
        "gpus": [g["name"] for g in env.gpus],
        "threads": int(env.variables.get("REPRO_THREADS", 0)) or None,
    }


def data_now(config: Config) -> dict:
    from repro.data import DATASETS, DataError, dvc_check

    if config.data.name not in DATASETS:
        return {}
    try:
        return {"md5": dvc_check.check(config.data)}
    except DataError as e:
        return {"error": str(e)}


def _source(code: dict) -> dict:
    """What names a run's code for a replay: its source hash (not the sweep snapshot's id, which
    also covers conf/, and a replay takes its config from the record)."""
    return {k: v for k, v in code.items() if k != "snapshot"}


def differences_before(record: dict, config: Config, git_now: dict, code_now: dict,
                       locks: tuple[str | None, str | None] = (None, None)) -> dict[str, list]:
    """`locks`: the recorded whole environment and the one the replay runs in (both, or neither: the 12-package summary)."""
    then_data = {"md5": view(record).data.md5} if "md5" in view(record).data.raw else {}
    then_lock, now_lock = locks if all(locks) else (None, None)
    then_env, now_env = environment_then(record, then_lock), environment_now(config, now_lock)
    if then_lock and (then_content := lock.contents(then_lock)) and (now_content := lock.contents(now_lock)):
        # one version, other files (a rebuilt wheel, another build on another index): named, as a version would be
        shared = [n for n in then_content if n in now_content and then_env["packages"].get(n) == now_env["packages"].get(n)]
        then_env["packages content"] = {n: then_content[n][:16] for n in shared}
        now_env["packages content"] = {n: now_content[n][:16] for n in shared}
    return {name: rows for name, rows in {
        "environment": diff(then_env, now_env),
        "code": diff({"git": {k: getattr(view(record).git, k) for k in ("commit", "dirty", "diff_sha256")},
                      **_source(view(record).code)},
                     {"git": {k: git_now.get(k) for k in ("commit", "dirty", "diff_sha256")}, **_source(code_now)}),
        "data": diff(then_data, data_now(config)),
        # A SLURM run replays here, not through its scheduler: where it ran is listed as a difference.
        "scheduler": diff(render.scheduler_where(view(record).raw.get("scheduler")), render.scheduler_where(scheduler.block())),
    }.items() if rows}


def judge(original: dict, replay: dict) -> Verdict:
    then, now = view(original), view(replay)
    if then.status != "ok":
        return Verdict("not-comparable", [f"the original run ended {then.status!r}, with no results to compare"])
    if now.status != "ok":
        reason = now.error.get("reason", "")
        return Verdict("not-comparable", [f"the replay ended {now.status!r}: {reason}"])
    a, b = then.results, now.results
    if a.loss_sha256 == b.loss_sha256 and a.params_sha256 == b.params_sha256:
        return Verdict("exact", ["loss trajectory and final parameters are bitwise identical"])
    la, lb = a.loss, b.loss
    if len(la) != len(lb):
        return Verdict("differs", [f"{len(lb)} losses against {len(la)} recorded"])
    rel = [abs(x - y) / max(abs(x), 1e-12) for x, y in zip(la, lb)]
    worst = max(rel, default=0.0)
    first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), None)
    where = (f"losses first differ at step {first + 1} ({la[first]!r} recorded, {lb[first]!r} now); "
             f"largest relative difference {worst:.3g}") if first is not None else "losses are identical"
    params = "parameters differ bitwise" if a.params_sha256 != b.params_sha256 else "parameters identical"
    if all(not math.isnan(r) for r in rel) and worst <= LOSS_RTOL:
        return Verdict("close", [f"{where} (within {LOSS_RTOL:g})", params])
    return Verdict("differs", [where, params])


def timing_ratios(original: dict, replay: dict) -> dict[str, Timing]:
    out = {}
    for key in TIMINGS:
        old, new = view(original).results.raw.get(key), view(replay).results.raw.get(key)
        if old and new:
            ratio = new / old
            out[key] = Timing(recorded=old, now=new, ratio=ratio, within=abs(ratio - 1) <= TIMING_TOLERANCE)
    return out


def originals_for(ledger: Ledger, ids: list[str], experiment: str | None) -> list[dict]:
    if experiment:
        from repro.report.compare import newest_sweep

        return newest_sweep(ledger, experiment)
    records = [ledger.current(ledger.get(i)) for i in ids]  # a 'started' id finds its end
    for r in records:
        if view(r).kind != "run":
            raise LedgerError(f"record {view(r).id} is a {view(r).kind!r} record, not a run: replay a run's id")
    return records


def _print_differences(console: Console, record: dict, rows: dict[str, list]) -> None:
    rec = view(record)
    console.print(f"[bold]replay of {rec.id}[/] ({markup(rec.config.framework.name)} "
                  f"{markup(rec.config.model.name)}/{markup(rec.config.model.preset)})")
    if not rows:
        console.print("  no differences in environment, code or data")
    for section, items in rows.items():
        console.print(f"  {section} differs:")
        for key, then, now in items:
            console.print(f"    {markup(key)}: {markup(repr(then))} → {markup(repr(now))}")


def provenance(before: dict[str, list], restored: dict | None, workload: bool = False) -> dict[str, str]:
    """Per part of a run (code, packages, data, hardware; and `workload` for a model of your own
    package, whose source is recorded apart from repro's code): restored, same or differs."""
    env_rows = before.get("environment", [])
    packages = any(key.startswith("packages") for key, *_ in env_rows)
    hardware = any(not key.startswith("packages") for key, *_ in env_rows)
    code_part, packages_part = "differs" if "code" in before else "same", "differs" if packages else "same"
    if restored:
        code_part = "restored" if "code" not in before else "differs"
        packages_part = ("substituted" if restored["substitutes"] else "restored") if not packages else "differs"
        if packages_part == "restored" and restored.get("content_checked") == 0:  # a lock from before content digests
            packages_part = "versions restored (content not verifiable for this record)"
        if restored.get("packages_from"):  # a record from before locks, in this environment: nothing was rebuilt
            packages_part = "same" if not packages else "differs"
    # the workload: --as-recorded restored it (workload_source.restore) or refused before anything ran
    workload_part = "restored" if restored else ("differs" if "workload" in before else "same")
    return {"code": code_part, "packages": packages_part, "data": "differs" if "data" in before else "same",
            "hardware": "differs" if hardware else "same", **({"workload": workload_part} if workload else {})}


def replay(ledger_dir: str, ids: list[str], experiment: str | None = None, tracking_uri: str | None = None,
           progress: str = "auto", as_recorded: bool = False, allow_substitutes: bool = False,
           wheelhouse: str | None = None) -> list[dict]:
    from repro.envs import restore
    from repro.loop import sweep
    from repro.session import Session

    ledger = Ledger(ledger_dir)
    originals = originals_for(ledger, ids, experiment)
    if as_recorded:  # refuse before anything runs: every record must be restorable
        from repro import gitinfo

        today = gitinfo.state(paths.repo_root(), ledger.root)
        for original in originals:
            text = restore.check(original, ledger.root, today)
            if wheelhouse and text is None:
                raise EnvError(f"record {view(original).id} predates whole-environment locks: a wheelhouse has nothing "
                               "to install for it (it runs in this environment); replay it without --wheelhouse")
            if wheelhouse:  # the pack must hold every wheel, intact: one line before any worker starts
                from repro.envs import pack

                pack.check(wheelhouse, workload_source.lock_without(text, original), f"record {view(original).id}")
            if why := workload_source.refusal(original):  # a model of your package: its source too
                raise EnvError(why)
    uri = tracking_uri or paths.default_tracking_uri()

    def replayed(record: dict) -> Config:
        """The recorded config (keys it predates at their defaults), into this ledger and store; a config
        holding keys this repro does not know (a newer one wrote it) is refused, not run without them."""
        rec = view(record)
        if rec.unknown_keys:
            raise LedgerError(f"record {rec.id}'s config holds keys this repro does not know "
                              f"({', '.join(rec.unknown_keys)}): replay it with the repro that wrote it")
        config = copy.deepcopy(rec.config)  # the view's own is shared by every reader
        config.ledger.dir, config.tracking.uri, config.progress = str(ledger.root), uri, ProgressConfig(mode=progress)
        return config

    for original in originals:  # refused before any worker starts, one line each, as a sweep's preflight would
        if why := refusal(replayed(original), as_recorded, original):
            raise EnvError(f"{view(original).id} cannot be replayed here: {why}")
    session = Session.replaying(replayed(originals[0]), originals)  # a replay is named as the run it replays
    policy = Replays(ledger, originals, replayed, session, as_recorded, allow_substitutes, wheelhouse)
    sweep.run(session, policy, sweep.order_seed(session.sweep_id))
    _print_groups(policy.console, originals, policy.verdicts)
    return policy.verdicts


def refusal(config: Config, as_recorded: bool = False, record: dict | None = None) -> str | None:
    """Why a recorded config cannot run here (the preflight's checks of today's code, the hardware
    profile against this machine, and for a plain replay of `record`: a change to what today's code
    computes for it since it was made, config/changes.py), or None. As recorded, the recorded code
    decides what it accepts: only the hardware is checked."""

    from repro.config import changes
    from repro.config.schema import ConfigError
    from repro.preflight import checks

    try:
        if not as_recorded:
            checks.check_typed(copy.deepcopy(config))
        hardware.check_all([config.hardware])
    except ConfigError as e:
        return str(e)
    if record and not as_recorded and (change := changes.since(view(record).created or None, config.framework.name,
                                                                 config.model.name)):
        return (f"today's code computes {config.framework.name} {config.model.name} differently since "
                f"{change.at[:10]} ({change.commit}: {change.what}), after this run was made; replay it in the "
                f"code and packages it ran with: repro replay {view(record).id[:16]} --as-recorded")
    return None


class Replays(Policy):
    """A replay as a policy of the sweep loop: the recorded runs, once each, in the order given;
    before each, its code and packages restored (as recorded) and the differences said; after
    each, the verdict judged and recorded."""

    shuffled = reruns = False

    def __init__(self, ledger: Ledger, originals: list[dict], replayed, session, as_recorded: bool,
                 allow_substitutes: bool, wheelhouse: str | None = None):
        self.ledger, self.originals, self.as_recorded, self.allow_substitutes = ledger, originals, as_recorded, allow_substitutes
        self.places_known = not as_recorded  # as recorded: `before` restores each job's code and packages
        self.wheelhouse = wheelhouse
        self.console, self.verdicts, self.state = report.console(), [], {}
        self.by_id = {view(r).id: r for r in originals}
        self.jobs = []
        for original in originals:
            extra = {"replay_of": view(original).id}
            if steps := window.replay_steps(original):  # run.steps=auto: the count it took, bit for bit
                extra["replay_steps"] = steps
            if "repeat" in original:  # a repeat replays as a repeat of its group: the table keeps one row per config
                extra["repeat"] = original["repeat"]
            config = replayed(original)
            self.jobs.append(Job(config, ("replay", view(original).id), session.run_name(config, []), extra))

    def round(self, k: int) -> list[Job]:
        return self.jobs

    def before(self, job: Job, host) -> Job:
        from dataclasses import replace

        from repro.envs import restore
        from repro.job.launch import resolve_python

        original = self.by_id[job.fields["replay_of"]]  # the record field the replay's run carries
        then_hash = view(original).environment.env_hash
        then_lock = lock.load(self.ledger.root, then_hash) if then_hash else None
        fields, place = dict(job.fields), None
        if self.as_recorded:
            restored = restore.restore(original, self.ledger.root, host.git, self.allow_substitutes, log=self.console.print,
                                       wheelhouse=self.wheelhouse)
            git_now, code_now, now_lock, place = restored.git, restored.code, restored.lock_text, restored.place
            fields.update(git=restored.git, code=restored.code)
            place, workload = workload_source.restore(original, place, log=self.console.print)
            fields.update(workload)
        else:
            restored, git_now, code_now = None, host.git, host.code
            now_lock = (lock.of_interpreter(resolve_python(job.config.framework.python), envcache.locks())
                        if then_lock else None)
        before = differences_before(original, job.config, git_now, code_now, (then_lock, now_lock))
        before.update({} if self.as_recorded else workload_source.differences(original))  # your model's source
        _print_differences(self.console, original, before)
        parts = provenance(before, restored.info if restored else None, workload_source.KEY in original)
        self.state[view(original).id] = (original, before, restored, parts)
        return replace(job, fields=fields, place=place)

    def after(self, job: Job, result: dict, host) -> None:
        original, before, restored, parts = self.state.pop(job.fields["replay_of"])
        verdict = judge(original, result)
        verdict.reasons.append(", ".join(f"{k} {v}" for k, v in parts.items()))
        if config_hash(as_dict(job.config)) != view(original).config_hash:
            verdict.reasons.append("the recorded config hashes differently under this version of repro")
        timing = timing_ratios(original, result)
        record = self.ledger.append({
            "kind": "replay", "status": verdict.status, "of": view(original).id, "replay": view(result).id,
            "config_hash": view(original).config_hash, "reasons": verdict.reasons,
            "differences_before": {k: [list(r) for r in v] for k, v in before.items()},
            "timing": {key: dataclasses.asdict(t) for key, t in timing.items()}, "loss_rtol": LOSS_RTOL,
            "timing_tolerance": TIMING_TOLERANCE, "parts": parts,
            **({"as_recorded": restored.info} if restored else {}),
        })
        host.tag(result, {"repro.replay_verdict": verdict.status})
        self.console.print(f"  verdict: [bold]{verdict.status}[/] — {'; '.join(verdict.reasons)} "
                           f"(ledger {view(record).id})")
        for key, t in timing.items():
            mark = "" if t.within else f"  (outside ±{TIMING_TOLERANCE:.0%})"
            self.console.print(f"    {key}: {t.recorded * 1e3:.2f} ms → {t.now * 1e3:.2f} ms, ×{t.ratio:.2f}{mark}")
        self.verdicts.append(record)


def _print_groups(console: Console, originals: list[dict], verdicts: list[dict]) -> None:
    """One line per config replayed with its repeats (`run.repeats`): their verdicts together."""
    from repro.report.comparison import by_config

    status = {view(v).replay_verdict.of: view(v).status for v in verdicts}
    for group, runs in by_config(originals).items():
        if len(runs) > 1:
            counts = [status.get(view(r).id, "not replayed") for r in runs]
            words = ", ".join(f"{counts.count(s)} {s}" for s in dict.fromkeys(counts))
            config = view(runs[0]).config
            console.print(f"repeats of {config.framework.name} {config.model.name} (group {group}): {words}")


def add_parser(sub, common) -> None:
    p = sub.add_parser("replay", help="re-run recorded runs and compare them with the record", parents=[common])
    p.add_argument("ids", nargs="*", help="ledger ids (or unique prefixes) of runs")
    p.add_argument("--experiment", help="replay every run of this experiment's newest recorded sweep (older ones: by id)")
    p.add_argument("--tracking-uri", help="MLflow store for the replay runs (default: as for any run)")
    p.add_argument("--progress", default="auto", choices=("auto", "rich", "plain", "none"),
                   help="progress display, as progress.mode (auto: rich on a terminal, plain in logs)")
    p.add_argument("--as-recorded", action="store_true",
                   help="run in the recorded code (a git worktree of its commit) and packages (a uv venv of its "
                        "whole environment), both cached: `repro env list`")
    p.add_argument("--allow-substitutes", action="store_true",
                   help="with --as-recorded: a recorded version no index serves here is replaced by the nearest one, "
                        "and the replay says so")
    p.add_argument("--wheelhouse", metavar="DIR",
                   help="with --as-recorded: install the recorded packages from this pack only (`repro env pack`), "
                        "offline; a missing or changed wheel is refused before any worker starts")
    p.set_defaults(func=run_cli)


def run_cli(args) -> int:
    if args.wheelhouse and not args.as_recorded:
        print("repro replay: --wheelhouse goes with --as-recorded (a plain replay runs in today's packages and "
              "installs nothing)", file=sys.stderr)
        return 2
    if args.allow_substitutes and not args.as_recorded:
        print("repro replay: --allow-substitutes goes with --as-recorded (a plain replay uses today's packages)",
              file=sys.stderr)
        return 2
    if bool(args.ids) == bool(args.experiment):
        print("repro replay: give run ids or --experiment NAME (not both)", file=sys.stderr)
        return 2
    from repro.worker import lifeline

    lifeline.interrupt_on_signals()  # as a sweep: the replay in progress is recorded interrupted, one line
    try:
        verdicts = replay(args.ledger, args.ids, args.experiment, args.tracking_uri, args.progress,
                          args.as_recorded, args.allow_substitutes, args.wheelhouse)
    except (LedgerError, EnvError, RecordError) as e:
        print(f"repro replay: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the sweep loop recorded the run in progress and closed the session
        print("repro replay: interrupted (Ctrl-C or SIGTERM); the replay in progress is recorded 'interrupted' in "
              "the ledger, nothing else ran", file=sys.stderr)
        return 130
    return 0 if all(view(v).status in ("exact", "close") for v in verdicts) else 1
