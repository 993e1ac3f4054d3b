"""Determinism is a stated condition (issue: the GPU headline, fair by default): every verdict says the
mode it was measured in, two sides of different modes are refused unless the mode is the axis swept, the
audit says what differs once, the price of determinism is read per framework with its interval and each
mode's bit-identity, and torch's NaN fill is a key of its own. Records built by hand: no processes."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from repro.config.schema import ConfigError
from repro.ledger import Ledger
from repro.preflight import plan
from repro.report import audit, comparison, determinism_price, identity
from repro.report import verdict as V

from conftest import shipped_ledger

ROOT = Path(__file__).resolve().parent.parent


def _record(rid: str, framework: str, median: float, index: int, deterministic: bool = True, fill=None,
            swept=("framework",), job: int = 0, kernels: bool | None = None, loss: list | None = None) -> dict:
    run = {"batch_size": 8, "task": "train", "deterministic": deterministic, "fill_uninitialized_memory": fill,
           "steps": 20}
    values = {"framework": framework, "run.deterministic": str(deterministic).lower(),
              "run.fill_uninitialized_memory": "null" if fill is None else str(fill).lower()}
    loss = loss if loss is not None else [2.5, 2.4, 2.3]
    kernels = deterministic if kernels is None else kernels
    return {"id": rid, "kind": "run", "status": "ok", "sweep": {"id": "s", "job": job},
            "config": {"framework": {"name": framework}, "run": run, "model": {"name": "vit", "preset": "tiny"},
                       "precision": {"name": "fp32"}, "sharding": {"name": "none"}, "hardware": {"name": "cpu"},
                       "verdict": {"band": 0.02}},
            "effective": {"determinism": {"deterministic_kernels": kernels, "autotuning": False}},
            "results": {"steady_median_s": median, "steps": 20, "loss": loss,
                        "loss_sha256": "h" + "".join(map(str, loss)), "params_sha256": "p" + "".join(map(str, loss))},
            "repeat": {"index": index, "count": 5, "group": f"s/{framework}/{deterministic}/{fill}"},
            "overrides": [f"{k}={values[k]}" for k in swept]}


def _sweep(configs: dict[tuple, list[float]], swept) -> list[dict]:
    """Rounds of every config (framework, deterministic, fill) -> its five medians."""
    out, job = [], 0
    for k in range(5):
        for (fw, det, fill), medians in configs.items():
            out.append(_record(f"{fw}{det}{fill}{k}", fw, medians[k], k, det, fill, swept, job))
            job += 1
    return out


WOBBLE = [1.0, 1.01, 0.99, 1.02, 0.98]


def test_every_verdict_names_its_mode():
    records = _sweep({("jax", False, None): [1.0 * w for w in WOBBLE],
                      ("torch", False, None): [1.5 * w * (1 + 0.002 * i) for i, w in enumerate(WOBBLE)]}, ("framework",))
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.FASTER and v.axis == "framework"
    assert v.text.startswith("jax is 1.5") and "on vit/tiny with each library's default kernels (run.deterministic=false) (95 % CI" in v.text
    det = _sweep({("jax", True, None): [1.0 * w for w in WOBBLE],
                  ("torch", True, None): [1.2 * w for w in WOBBLE]}, ("framework",))
    (v,) = comparison.build(det).tables[0].verdicts
    assert "on vit/tiny in deterministic mode (run.deterministic=true) (95 % CI" in v.text


def test_a_pair_of_two_modes_nobody_varied_is_refused():
    """jax measured deterministic, torch free, from two sweeps: refused, naming both modes; never 'faster'."""
    jax = [_record(f"j{k}", "jax", 1.0 * WOBBLE[k], k, True, job=k) for k in range(5)]
    torch = [_record(f"t{k}", "torch", 1.5 * WOBBLE[k], k, False, job=k) for k in range(5)]
    for r in torch:
        r["sweep"]["id"] = "other"
    (v,) = comparison.build(jax + torch).tables[0].verdicts
    assert v.outcome == V.UNFAIR and not v.decided and "faster" not in v.text
    assert "no verdict, an unfair pair: jax · deterministic was measured in deterministic mode (run.deterministic=true), " \
           "torch · free with each library's default kernels (run.deterministic=false)" in v.text
    assert "sweep run.deterministic=true,false" in v.text


def test_determinism_swept_is_an_axis_with_its_own_verdicts():
    """A sweep of framework x run.deterministic: framework pairs only within a mode, and per framework
    a deterministic-vs-free verdict (its mode is the axis, so the sentence names none)."""
    records = _sweep({("jax", True, None): WOBBLE, ("jax", False, None): [0.97 * w for w in WOBBLE],
                      ("torch", True, None): [1.4 * w for w in WOBBLE], ("torch", False, None): WOBBLE},
                     ("framework", "run.deterministic"))
    verdicts = comparison.build(records).tables[0].verdicts
    assert sorted(v.axis for v in verdicts) == ["framework", "framework", "run.deterministic", "run.deterministic"]
    assert not any(v.outcome == V.UNFAIR for v in verdicts)
    for v in verdicts:
        if v.axis == "framework":  # jax vs torch, both deterministic or both free
            assert {r.records[0]["config"]["run"]["deterministic"] for r in v.rows} in ({True}, {False})
        else:
            assert {v.a, v.b} == {"deterministic", "free"} and "run.deterministic=" not in v.text


def test_the_price_per_framework_with_its_interval_bit_identity_and_fill_share():
    det_t = [1.4 * w for w in WOBBLE]
    nofill = [1.1 * w for w in WOBBLE]
    records = _sweep({("jax", True, None): WOBBLE, ("jax", False, None): WOBBLE,
                      ("torch", True, None): det_t, ("torch", True, False): nofill, ("torch", False, None): WOBBLE},
                     ("framework", "run.deterministic", "run.fill_uninitialized_memory"))
    for r in records:  # torch free: a new loss every process (nondeterministic kernels)
        if r["config"]["framework"]["name"] == "torch" and not r["config"]["run"]["deterministic"]:
            k = r["repeat"]["index"]
            r["results"].update(loss=[2.5, 2.4 + k / 100, 2.3], loss_sha256=f"free{k}")
    c = comparison.build(records)
    fill = [v for v in c.tables[0].verdicts if v.axis == "run.fill_uninitialized_memory"]
    assert [(v.a, v.b) for v in fill] == [("NaN fill (torch's default)", "no NaN fill")]
    prices = {p.framework: p for p in determinism_price.prices(c)}
    assert set(prices) == {"jax", "torch"}
    torch = prices["torch"]
    assert torch.ratio == pytest.approx(1.4) and torch.interval[0] < 1.4 < torch.interval[1]
    assert torch.outcome == V.FASTER and torch.cells()["outcome"] == "deterministic slower"
    assert torch.fill_share == pytest.approx(math.log(1.4 / 1.1) / math.log(1.4))
    assert torch.deterministic == torch.no_fill == "bit-identical across 5 processes (loss and parameters)"
    assert torch.free.startswith("not bit-identical: 5 distinct loss hashes among 5 processes; the losses first "
                                 "differ at step 2")
    assert prices["jax"].fill_share is None and prices["jax"].ratio == pytest.approx(1.0)
    (line,) = [x for x in determinism_price.lines(c) if x.startswith("torch")]
    assert "deterministic mode costs 1.40×" in line and "the NaN fill takes 72% (point estimate)" in line
    from repro.report import markdown
    page = "\n".join(markdown.price_lines(c))
    assert "## The price of determinism" in page and "| vit/tiny | torch | 1.40 |" in page


def test_identity_names_the_first_step_where_processes_parted():
    a = _record("a", "torch", 1.0, 0, loss=[2.5, 2.4, 2.3])
    b = _record("b", "torch", 1.0, 1, loss=[2.5, 2.4, 2.31])
    assert identity.of([a]).identical is None and identity.of([a]).text == ""
    found = identity.of([a, b])
    assert not found.identical and "first differ at step 3 (between runs a and b)" in found.text
    b["results"]["steps"] = 30
    assert "different step counts (20, 30)" in identity.of([a, b]).text
    row = comparison.row([a, _record("c", "torch", 1.0, 1)], "torch", {})
    assert identity.table_line([row]) == ("repeats: torch: bit-identical across 2 processes (loss and parameters)", False)
    broken = comparison.row([a, _record("b2", "torch", 1.0, 1, loss=[2.5, 2.41, 2.3])], "torch", {})
    text, warn = identity.table_line([broken])
    assert warn and text.startswith("WARNING: a deterministic config diverged across processes: torch: ")
    kept = identity.by_config([a, _record("c", "torch", 1.0, 1), _record("j", "jax", 1.0, 0)])
    assert kept == {"s/torch/True/None": {"processes": 2, "identical": True, "deterministic": True,
                                          "text": "bit-identical across 2 processes (loss and parameters)"}}
    free = comparison.row([_record(x, "torch", 1.0, i, False, loss=[2.5, 2.4 + i]) for i, x in enumerate("xy")],
                          "torch", {})
    text, warn = identity.table_line([free])
    assert not warn and text.endswith("(expected: run.deterministic=false)")


def test_a_divergence_under_a_shared_compile_cache_names_the_cache():
    """run.compile_cache=repeats with a garbled inductor cache: ok runs, not bit-identical; the cache is the suspect."""
    a, b = (_record(x, "torch_compile", 1.0, i, loss=[2.5, 2.4, 2.3 + i / 100]) for i, x in enumerate("ab"))
    for r in (a, b):
        r["config"]["run"]["compile_cache"] = "repeats"
    found = identity.of([a, b])
    assert not found.identical and found.text.endswith(
        "; suspect: the compile cache (run.compile_cache=repeats: later processes load what an earlier one compiled, "
        "and a damaged cache entry runs another program): rerun cold with run.compile_cache=cold")
    a["config"]["run"]["compile_cache"] = b["config"]["run"]["compile_cache"] = "cold"
    assert "suspect" not in identity.of([a, b]).text  # a cold cache is no suspect
    b["results"] = dict(a["results"])
    a["config"]["run"]["compile_cache"] = "repeats"
    assert identity.of([a, b]).text == "bit-identical across 2 processes (loss and parameters)"


def _printed(found: audit.Audit, records: list[dict]) -> str:
    out = io.StringIO()
    audit.print_audit(Console(file=out, width=400), found, records)
    return out.getvalue()


def test_the_audit_says_what_differs_once():
    records = _sweep({("jax", True, None): WOBBLE, ("jax", False, None): WOBBLE}, ("framework", "run.deterministic"))
    for r in records:
        r["effective"]["determinism"]["autotuning"] = not r["config"]["run"]["deterministic"]
    found = audit.audit(records, lambda r: r["id"])
    assert [label for label, *_ in found.varied] == ["deterministic kernels", "autotuning"]
    text = _printed(found, records)
    assert "(so these differ: deterministic kernels, autotuning)" in text
    equal = text.split("(", 2)[-1]
    assert "all equal" in equal and "deterministic kernels" not in equal and "autotuning" not in equal


def test_library_defaults_explain_kernels_that_differ_by_framework():
    """Under run.deterministic=false XLA:CPU's kernels are deterministic and torch's are not: the
    framework explains it. Under run.deterministic=true the same difference is a loud warning."""
    free = [_record("j", "jax", 1.0, 0, False, kernels=True), _record("t", "torch", 1.0, 0, False, kernels=False)]
    found = audit.audit(free, lambda r: r["id"])
    assert not found.differences and [label for label, *_ in found.varied] == ["deterministic kernels"]
    det = [_record("j", "jax", 1.0, 0, True, kernels=True), _record("t", "torch", 1.0, 0, True, kernels=False)]
    assert [label for label, _ in audit.audit(det, lambda r: r["id"]).differences] == ["deterministic kernels"]


def test_the_fill_applies_to_torch_deterministic_only_and_such_jobs_run_once(capsys):
    jobs = plan(["+exp=price_of_determinism", "hardware=cpu", "model.preset=tiny", "precision=fp32",
                 "run.repeats=1"]).jobs
    assert "8 of 24 jobs are the same config as another" in capsys.readouterr().err
    seen = [(j.model.name, j.framework.name, j.run.deterministic, j.run.fill_uninitialized_memory) for j in jobs]
    assert len(seen) == len(set(seen)) == 16
    assert all(fill is None for _, fw, det, fill in seen if fw == "jax" or not det)
    assert {fill for _, fw, det, fill in seen if fw != "jax" and det} == {None, False}
    (one,) = plan(["framework=jax", "run.fill_uninitialized_memory=false"]).jobs
    assert one.run.fill_uninitialized_memory is None
    with pytest.raises(ConfigError, match="fill_uninitialized_memory"):
        plan(["run.fill_uninitialized_memory=maybe"])


def test_every_shipped_exp_that_compares_frameworks_states_its_mode_and_one_start():
    found = 0
    for path in sorted((ROOT / "conf" / "exp").glob("*.yaml")):
        exp = OmegaConf.load(path)
        params = OmegaConf.select(exp, "hydra.sweeper.params") or {}
        if "framework" not in params or "," not in str(params["framework"]):
            continue
        found += 1
        run = exp.get("run") or {}
        swept = "run.deterministic" in params
        assert swept or run.get("deterministic") is False, f"{path.name}: set run.deterministic: false (the study's mode)"
        assert run.get("init") == "shared", f"{path.name}: set run.init: shared (one start for every framework)"
    assert found >= 7


def test_torch_records_its_nan_fill():
    import torch

    from repro.backends import determinism

    before = torch.utils.deterministic.fill_uninitialized_memory
    try:
        torch.utils.deterministic.fill_uninitialized_memory = False
        assert determinism.torch_effective(torch, False, {})["fill_uninitialized_memory"] is False
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = before
    assert determinism.torch_effective(torch, False, {})["fill_uninitialized_memory"] is before


def test_every_shipped_record_rebuilds_its_config_with_its_hash():
    """A record older than a key (model.impl, run.fill_uninitialized_memory, ...) rebuilds its config
    with the value that key had before it existed, and the hash it was recorded with: the config a
    replay hands its worker (the first day's records crashed it: no attribute 'impl')."""
    from repro.config import config_hash
    from repro.config.schema import as_dict, from_dict
    from repro.ledger import Ledger

    ledgers = [shipped_ledger(), *sorted((ROOT / "experiments").glob("*/ledger"))]
    runs = [r for lg in ledgers for r in Ledger(lg).heads(kind="run")]
    assert len(runs) >= 50
    for r in runs:
        config = from_dict(r["config"])
        assert config.model.impl in ("native", "hf") and config_hash(as_dict(config)) == r["config_hash"], r["id"]


@pytest.mark.slow
def test_a_cpu_sweep_of_the_mode_prices_it_and_says_what_differs_once(tmp_path):
    from conftest import Sandbox

    box = Sandbox(tmp_path)
    proc = box.run("-m", "framework=torch", "run.deterministic=true,false", "model=mlp", "model.preset=tiny",
                   "run.steps=12", "run.warmup=4", "run.repeats=2", "verdict.max_reruns=0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = " ".join(proc.stdout.split())
    assert "varied on purpose: run.deterministic (so these differ: deterministic kernels)" in out
    equal = out.split("all equal")[0].split("fairness audit:")[-1]
    assert "autotuning" in equal and "deterministic kernels" not in equal
    # the pair's verdict, whichever way two rounds go (undecided: "A vs B on ...:"; decided: "A is N× faster than B on ...")
    assert re.search(r"(deterministic vs free|free vs deterministic) on mlp/tiny · torch:|"
                     r"(free|deterministic) is [\d.]+× faster than (deterministic|free) on mlp/tiny · torch|"
                     r"(deterministic and free|free and deterministic) are equivalent within ±[\d.]+ % on mlp/tiny · torch",
                     out), out[-3000:]
    assert "price of determinism: torch on mlp/tiny: deterministic mode costs" in out
    assert "torch · deterministic: bit-identical across 2 processes (loss and parameters)" in out


def test_runs_whose_measured_steps_overlapped_are_never_interleaved_nor_judged():
    """submitit_local started four jobs within 6 s on two cores, and the close still said "interleaved,
    paired over 2 rounds": runs measured at the same time on one host are refused, naming the overlap."""
    records = _sweep({("jax", False, None): WOBBLE, ("torch", False, None): [1.5 * w for w in WOBBLE]}, ("framework",))
    for i, r in enumerate(records):  # one after another: round k's two runs at 10k and 10k + 2 s, 1 s each
        r["machine"] = {"host": "h"}
        r["wall_split"] = {"window": [10.0 * r["repeat"]["index"] + 2 * (i % 2), 10.0 * r["repeat"]["index"] + 2 * (i % 2) + 1]}
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.FASTER and v.interleaved and ", interleaved," in v.text
    for r in records:  # the same runs, each round's two started together
        r["wall_split"]["window"] = [10.0 * r["repeat"]["index"], 10.0 * r["repeat"]["index"] + 1]
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.UNFAIR and not v.interleaved and "interleaved" not in v.text
    assert "their measured steps ran at the same time on one host (5 pair(s) of runs overlapped on h" in v.text
    for r in records:  # the same, each pinned to its own 4 of 8 cores (worker/pinning.py): compared, and said
        jax = r["config"]["framework"]["name"] == "jax"
        r["machine"]["pinned"] = {"parent": [0 if jax else 4], "worker": [1, 2, 3] if jax else [5, 6, 7]}
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.FASTER and not v.interleaved and v.apart == 5
    assert "5 pair(s) of runs measured at the same time on one host, on disjoint cores" in v.text, v.text
    records[0]["machine"]["pinned"] = {"parent": [0], "worker": [1, 2, 3, 4]}  # one core shared: refused again
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.UNFAIR and "(1 pair(s) of runs overlapped on h" in v.text
    for r in records:  # on two hosts (two nodes): nothing shared
        r["machine"].pop("pinned")
        if r["config"]["framework"]["name"] == "torch":
            r["machine"]["host"] = "other"
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.FASTER


@pytest.mark.slow
def test_a_planted_nondeterminism_is_named_at_its_first_differing_step(tmp_path):
    """tests/planted: a model whose torch twin adds an unseeded draw from its third training step on. Its
    repeats under run.deterministic=true are a finding: a warning naming step 3 and the two runs."""
    from conftest import Sandbox

    box = Sandbox(tmp_path)
    planted = ROOT / "tests" / "planted"
    proc = box.run("--config-dir", str(planted / "conf"), "-m", "framework=torch", "model=planted", "run.steps=8",
                   "run.warmup=2", "run.repeats=2", "verdict.max_reruns=0", PYTHONPATH=str(planted))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = " ".join(proc.stdout.split())
    assert "WARNING: a deterministic config diverged across processes: torch: not bit-identical: 2 distinct loss " \
           "hashes among 2 processes; the losses first differ at step 3 (between runs " in out
    (sweep,) = [r for r in Ledger(box.ledger).heads(kind="sweep")]
    (same,) = sweep["identity"].values()
    assert same["identical"] is False and same["deterministic"] and "step 3" in same["text"]
