"""`repro history`: a ledger of 40 runs of one config, written through the ledger's own API in the
shape of a shipped record (started → ok, its config, environment and results), 2 % lognormal
noise (a fixed seed), with a 10 % step planted at run 20 (or none): the change is found at run
20, its step's interval holds 1.10, the bisect command names the runs on either side, and
`--fail-on-regression 5` exits 1 on it and 0 on the flat one. Runs of other hardware or of the
other determinism mode are separate series. The table is read off a real pty (pyte's screen), the
PNG opened. The change-point function's false positives on flat noise are counted (seeded)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pty
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from repro import paths
from repro.cli import run_subcommand
from repro.config.spec import config_hash
from repro.history import analysis, changepoints, plot, series
from repro.ledger import Ledger

SHIPPED_OK = paths.repo_root() / "ledger" / "2026-11-22" / "08447f06a1b4ca15.json"  # a quickstart jax mlp run
START = datetime(2026, 11, 1, tzinfo=timezone.utc)
N, AT, STEP, NOISE, SEED = 40, 20, 1.10, 0.02, 20261128


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def medians(step: float = STEP, n: int = N, at: int = AT, seed: int = SEED) -> list[float]:
    """Run medians of about 0.5 ms with 2 % lognormal noise, `step` times slower from run `at` on."""
    noise = np.exp(np.random.default_rng(seed).normal(0.0, NOISE, n))
    return [float(5e-4 * x * (step if i >= at else 1.0)) for i, x in enumerate(noise)]


def write_runs(ledger: Ledger, values: list[float], *, start: datetime = START, cpu: str | None = None,
               deterministic: bool = True, experiment: str = "history", first: int = 0) -> list[dict]:
    """One run per value, as a job writes it: its `started` record, then its `ok` record (prev: the
    started one) an hour later, copied from the shipped record with this run's time, commit,
    sweep, median and (where given) CPU model and determinism mode. Returns the ok records."""
    ok0 = json.loads(SHIPPED_OK.read_text())
    started0 = json.loads((SHIPPED_OK.parent / f"{ok0['prev']}.json").read_text())
    out = []
    for i, v in enumerate(values, start=first):
        config = copy.deepcopy(ok0["config"])
        config["run"]["deterministic"] = deterministic
        config["tracking"]["experiment"] = experiment
        at = start + timedelta(hours=6 * i)
        common = {"config": config, "config_hash": config_hash(config),
                  "git": {**ok0["git"], "commit": hashlib.sha1(f"commit {i}".encode()).hexdigest()},
                  "sweep": {**ok0["sweep"], "id": f"{at:%Y%m%dT%H%M%SZ}-{i:06x}", "experiment": experiment,
                            "job": 0, "jobs": 1}}
        started = {k: v for k, v in started0.items() if k not in ("id", "created")}
        started = ledger.append({**started, **common, "created": _iso(at)})
        ok = copy.deepcopy({k: v for k, v in ok0.items() if k not in ("id", "created", "prev")})
        ok["results"]["steady_median_s"] = v
        if cpu is not None:
            ok["environment"]["cpu"]["model"] = cpu
        out.append(ledger.append({**ok, **common, "prev": started["id"], "created": _iso(at + timedelta(hours=1))}))
    return out


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("stepped") / "ledger"
    return root, write_runs(Ledger(root), medians())


@pytest.fixture(scope="module")
def flat(tmp_path_factory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("flat") / "ledger"
    return root, write_runs(Ledger(root), medians(step=1.0))


def _found(root: Path, **select) -> list[analysis.Found]:
    return analysis.analyse(series.split(series.select(Ledger(root), **select)))


# ---- the change points, pure ---------------------------------------------------------------

def test_the_planted_step_is_found_at_run_20_with_its_size():
    found = changepoints.changes(medians())
    assert len(found) == 1
    c = found[0]
    assert abs(c.index - AT) <= 1 and c.p <= changepoints.ALPHA
    assert c.lo <= STEP <= c.hi and c.lo > 1.05 and c.slower
    assert (c.before_n, c.after_n) == (c.index, N - c.index)


def test_a_flat_series_has_no_change():
    assert changepoints.changes(medians(step=1.0)) == []


def test_false_positives_on_flat_noise_are_counted():
    """100 flat series of 40 runs with 2 % lognormal noise (seeds 0..99): at p <= 0.001 about 0.1
    series with a change is expected; counted here (bookkeeping with fixed seeds, no timing)."""
    rng = np.random.default_rng(7)
    hits = sum(bool(changepoints.change_indices(np.exp(rng.normal(0, NOISE, N)))) for _ in range(100))
    assert hits <= 1, hits


def test_the_energy_statistic_is_matteson_and_james():
    """Q(tau) from prefix sums equals the direct sums of Matteson & James (2014), eq. (3)-(4)."""
    z = np.log(medians(n=24, at=12))
    tau, q = changepoints.best_split(z, 4)

    def direct(t: int) -> float:
        x, y = z[:t], z[t:]
        m, n = len(x), len(y)
        xy = np.abs(x[:, None] - y[None, :]).sum()
        xx, yy = np.abs(x[:, None] - x).sum() / 2, np.abs(y[:, None] - y).sum() / 2
        return m * n / (m + n) * (2 * xy / (m * n) - xx / (m * (m - 1) / 2) - yy / (n * (n - 1) / 2))

    assert tau == max(range(4, 21), key=direct) and q == pytest.approx(direct(tau), rel=1e-12)
    assert changepoints.best_split(z[:7], 4) is None  # too short to split with 4 a side


def test_two_steps_give_two_changes_with_their_segments():
    values = medians(n=60, at=20)
    values = values[:40] + [v / 1.3 for v in values[40:]]  # +10 % at 20, then -23 % at 40
    found = changepoints.changes(values)
    assert [abs(c.index - i) <= 1 for c, i in zip(found, (20, 40))] == [True, True]
    assert found[0].slower and not found[1].slower and found[1].lo <= 1 / 1.3 <= found[1].hi


# ---- the ledger: series, changes, the bisect command, the gate ------------------------------

def test_the_ledger_series_finds_the_step_and_names_the_records_on_either_side(stepped):
    root, oks = stepped
    [found] = _found(root, config_hash=oks[0]["config_hash"][:8])
    assert len(found.series.points) == N and [p.id for p in found.series.points] == [r["id"] for r in oks]
    assert found.series.mode == "deterministic" and found.series.hardware.startswith("AMD EPYC")
    [c] = found.changes
    assert abs(c.index - AT) <= 1 and c.lo <= STEP <= c.hi
    good, bad = oks[c.index - 1], oks[c.index]
    assert found.bisect(c) == f"repro bisect {good['id'][:12]} {bad['id'][:12]}"
    assert found.bisect(c, "/x y") == f"repro bisect {good['id'][:12]} {bad['id'][:12]} --ledger '/x y'"
    assert found.series.points[c.index].commit == bad["git"]["commit"]
    assert analysis.newest_slowdown([found], 5) == [(found, c)] and analysis.newest_slowdown([found], 12) == []


def test_a_flat_ledger_series_has_no_change_and_passes_the_gate(flat):
    root, oks = flat
    [found] = _found(root, experiment="history")
    assert found.changes == () and analysis.newest_slowdown([found], 5) == []


def test_other_hardware_and_the_other_determinism_mode_are_separate_series(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    values = medians(step=1.0)
    epyc = write_runs(ledger, values[:20])
    xeon = write_runs(ledger, [v * 1.4 for v in values[20:30]], cpu="Intel Xeon", first=20)
    free = write_runs(ledger, [v * 0.8 for v in values[30:]], deterministic=False, first=30)
    found = _found(tmp_path / "ledger", experiment="history")
    got = {(f.series.hardware.split(",")[0], f.series.mode): [p.id for p in f.series.points] for f in found}
    assert got == {("AMD EPYC", "deterministic"): [r["id"] for r in epyc],
                   ("Intel Xeon", "deterministic"): [r["id"] for r in xeon],
                   ("AMD EPYC", "default kernels"): [r["id"] for r in free]}
    assert all(f.changes == () for f in found)  # mixed, the 1.4x and 0.8x runs would read as two changes
    assert len({f.series.config_hash for f in found}) == 2  # the mode is in the config hash; the CPU is not
    labels = {f.series.label for f in found}
    assert labels == {"jax · deterministic", "jax · free"}  # the run names the experiment's table gives them


def test_a_sweeps_label_names_its_config_over_the_whole_ledger(stepped):
    """`--sweep ID --label NAME`: the config its table labels NAME, with every ok run of it in the ledger."""
    root, oks = stepped
    [s] = series.split(series.select(Ledger(root), sweep=oks[7]["sweep"]["id"], label="jax"))
    assert s.label == "jax" and [p.id for p in s.points] == [r["id"] for r in oks]


def test_reruns_replays_and_bisection_probes_are_left_out(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    oks = write_runs(ledger, medians(step=1.0, n=12))
    ledger.append({**{k: v for k, v in oks[3].items() if k not in ("id", "prev")},
                   "replay_of": oks[0]["id"], "created": _iso(START + timedelta(days=30))})
    ledger.append({**{k: v for k, v in oks[4].items() if k not in ("id", "prev")},
                   "repeat": {"index": 0, "count": 1, "group": "g", "rerun": 1, "replaces": [oks[5]["id"]]}})
    ledger.append({**{k: v for k, v in oks[6].items() if k not in ("id", "prev")},  # a bisection's probe run, as
                   "bisect_probe": {"key": "k", "probe": 0, "position": 3, "side": "candidate"}})  # bisect/probe.py marks it
    chosen = series.select(ledger, config_hash=oks[0]["config_hash"])
    assert chosen.left_out == {"replaced by a rerun": 1, "replays": 1, "bisection probes": 1}
    [s] = series.split(chosen)
    assert oks[5]["id"] not in [p.id for p in s.points] and len(s.points) == 12


def test_the_png_has_its_size_and_opens(stepped, tmp_path):
    from PIL import Image

    root, oks = stepped
    found = _found(root, config_hash=oks[0]["config_hash"])
    out = plot.write(found, tmp_path / "h.png", "repro history: test")
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == plot.size_px(1) == (1000, 440)


# ---- the command in this process: output, JSON, refusals -------------------------------------

def test_the_command_prints_the_change_and_its_bisect_command(stepped, tmp_path, capsys):
    root, oks = stepped
    png = tmp_path / "h.png"
    assert run_subcommand(["history", oks[0]["config_hash"][:10], "--ledger", str(root), "--out", str(png)]) == 0
    out = capsys.readouterr().out
    [found] = _found(root, config_hash=oks[0]["config_hash"])
    [c] = found.changes
    assert f"change at run {c.index} " in out and "% slower; 95 % CI" in out
    assert f"repro bisect {oks[c.index - 1]['id'][:12]} {oks[c.index]['id'][:12]} --ledger {root}" in out
    assert f"plot: {png}" in out and png.stat().st_size > 0


def test_json_and_the_gate(stepped, flat, tmp_path, capsys):
    root, oks = stepped
    rc = run_subcommand(["history", "--experiment", "history", "--ledger", str(root), "--json",
                         "--out", str(tmp_path / "a.png"), "--fail-on-regression", "5"])
    got = json.loads(capsys.readouterr().out)
    [s] = got["series"]
    [c] = s["changes"]
    assert rc == 1 and got["fail_on_regression"]["failed"][0]["ratio"] == c["ratio"]
    assert c["before_id"] == oks[c["index"] - 1]["id"] and c["after_id"] == oks[c["index"]]["id"]
    assert c["lo"] <= STEP <= c["hi"] and len(s["points"]) == N and s["points"][0]["commit"] == oks[0]["git"]["commit"]
    rc = run_subcommand(["history", "--experiment", "history", "--ledger", str(flat[0]), "--out",
                         str(tmp_path / "b.png"), "--fail-on-regression", "5"])
    assert rc == 0 and "no regression over 5 %" in capsys.readouterr().out


@pytest.mark.parametrize("argv, says", [
    (["ffff0000"], "no ok run with config hash 'ffff0000'"),
    (["not-hex"], "'not-hex' is not a config hash"),
    ([], "give one of a config hash, --experiment NAME or --sweep ID"),
    (["--experiment", "nothing"], "no ok runs of experiment 'nothing'"),
    (["--experiment", "history", "--label", "torch"], "no workload labelled 'torch'; the labels here: 'jax'"),
    (["--experiment", "history", "--fail-on-regression", "five"], "--fail-on-regression 'five' is not a number"),
    (["--experiment", "history", "--fail-on-regression", "nan"], "--fail-on-regression 'nan' is out of range"),
    (["--experiment", "history", "--alpha", "2"], "--alpha '2' is out of range"),
    (["--experiment", "history", "--min-segment", "1"], "--min-segment '1' is out of range"),
    (["--sweep", "nosuch"], "no sweep 'nosuch'"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(stepped, tmp_path, capsys, argv, says):
    root, _ = stepped
    png = tmp_path / "never.png"
    assert run_subcommand(["history", *argv, "--ledger", str(root), "--out", str(png)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"repro history: {says}") and err.count("\n") == 1, err
    assert not png.exists()


def test_an_edited_record_is_refused(tmp_path, capsys):
    ledger = Ledger(tmp_path / "ledger")
    oks = write_runs(ledger, medians(step=1.0, n=12))
    path = next((tmp_path / "ledger").glob(f"*/{oks[2]['id']}.json"))
    path.write_text(path.read_text().replace(str(oks[2]["results"]["steady_median_s"]), "0.0001"))
    assert run_subcommand(["history", oks[0]["config_hash"], "--ledger", str(tmp_path / "ledger"),
                           "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert f"record {oks[2]['id']}" in err and "changed after it was written" in err and err.count("\n") == 1
    assert not (tmp_path / "x.png").exists()


# ---- as a person and a CI job see it (processes) ----------------------------------------------

@pytest.mark.slow
def test_fail_on_regression_exits_1_on_the_step_and_0_on_the_flat_series(stepped, flat, tmp_path):
    for (root, oks), code in ((stepped, 1), (flat, 0)):
        proc = subprocess.run([sys.executable, "-m", "repro", "history", oks[0]["config_hash"][:12], "--ledger",
                               str(root), "--out", str(tmp_path / f"{code}.png"), "--fail-on-regression", "5"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == code, proc.stderr
        assert ("regression: the newest change" in proc.stdout) == (code == 1)


def in_pty(cols: int, argv: list[str], rows: int = 200) -> list[str]:
    """The screen `argv` leaves in a real pty of `cols` columns, as a VT100 (pyte) shows it."""
    import fcntl
    import struct
    import termios

    import pyte

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env={**env, "TERM": "xterm"})
    os.close(slave)
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not data:
            break
        stream.feed(data)
    os.close(master)
    assert proc.wait(timeout=300) == 0
    return [line.rstrip() for line in screen.display]


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 120, 200])
def test_the_table_reads_whole_in_a_terminal(stepped, tmp_path, cols):
    root, oks = stepped
    lines = in_pty(cols, [sys.executable, "-m", "repro", "history", oks[0]["config_hash"][:8], "--ledger", str(root),
                          "--out", str(tmp_path / "h.png")])
    [found] = _found(root, config_hash=oks[0]["config_hash"])
    for i, p in enumerate(found.series.points):  # each run's row on one line: its number, id, median, commit
        row = next(ln for ln in lines if p.id[:12] in ln)
        assert row.split()[0] == str(i) and f"{p.median_s * 1e3:.5g}" in row and p.commit[:8] in row, row
    [c] = found.changes
    assert any(f"repro bisect {oks[c.index - 1]['id'][:12]} {oks[c.index]['id'][:12]}" in ln for ln in lines)
    assert any(ln.startswith(f"  change at run {c.index} ") for ln in lines)
    assert "…" not in "\n".join(lines)
