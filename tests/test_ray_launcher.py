"""hydra/launcher=ray (loop/ray_rounds.py) against a real Ray head on loopback (tests/ray_cluster.py,
started and stopped by the `ray_head` fixture): each round of an auto sweep one Ray task, waited for
before the loop decides the next; every record names its Ray job, task and node; an address where no
cluster answers is refused at once, naming it. Resume and Ctrl-C under Ray are test_launcher_parity's
(every registered launcher)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow  # every test here starts `python -m repro`


def _runs(sandbox, experiment: str) -> list[dict]:
    runs = [r for r in sandbox.heads() if r["kind"] == "run" and r["config"]["tracking"]["experiment"] == experiment]
    return sorted(runs, key=lambda r: r["sweep"]["job"])


def test_an_auto_sweep_runs_each_round_as_one_ray_task_and_its_records_name_it(ray_head, sandbox):
    proc = sandbox.run("-m", "framework=jax,torch", "model=mlp", "run.steps=6", "run.warmup=2", "run.repeats=auto",
                       "verdict.max_repeats=3", "verdict.max_reruns=0", "verdict.canary=false",
                       "tracking.inline_drain_s=0",  # no round's task imports MLflow (~3.3 s of CPU each): the close's
                       "hydra/launcher=ray", f"hydra.launcher.ray.init.address={ray_head.address}",
                       f"hydra.sweep.dir={sandbox.root / 'sweep'}", "tracking.experiment=ray_auto")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    rounds = int(re.search(r"run\.repeats=auto: (\d+) rounds", out).group(1))
    assert 2 <= rounds <= 3, out[-3000:]
    assert "stopped: every pair decided" in out or "verdict.max_repeats=3 reached, undecided" in out, out[-3000:]
    tasks = re.findall(r"round of 2 job\(s\) submitted as ray task ([0-9a-f]+)", out)
    assert len(tasks) == len(set(tasks)) == rounds, out[-3000:]
    runs = _runs(sandbox, "ray_auto")
    assert len(runs) == 2 * rounds and all(r["status"] == "ok" for r in runs), [r["status"] for r in runs]
    blocks = [r["scheduler"] for r in runs]
    assert {b["name"] for b in blocks} == {"ray"} and len({b["job_id"] for b in blocks}) == 1  # one driver: one Ray job
    assert {b["address"].rsplit(":", 1)[1] for b in blocks} == {str(ray_head.port)}
    assert all(b["resources"] == {"CPU": 1.0} and b["node"] and b["node_id"] for b in blocks)
    for k, task in enumerate(tasks):  # a round: one task, both configs in it, in its recorded order
        a, b = runs[2 * k], runs[2 * k + 1]
        assert a["scheduler"]["task_id"] == b["scheduler"]["task_id"] == task
        assert a["repeat"]["index"] == b["repeat"]["index"] == k
        assert [a["repeat"]["position"], b["repeat"]["position"]] == [0, 1]
    assert len({r["sweep"]["id"] for r in runs}) == 1


def test_an_address_where_no_cluster_answers_is_refused_at_once_and_nothing_runs(sandbox):
    from slurm_cluster import _free_ports

    port = _free_ports(1)[0]  # nothing listens there
    proc = sandbox.run("-m", "model=mlp", "framework=torch", "run.steps=6", "run.warmup=2", "hydra/launcher=ray",
                       f"hydra.launcher.ray.init.address=127.0.0.1:{port}", timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"repro: nothing was run: hydra/launcher=ray: no Ray cluster answered at "
                           f"hydra.launcher.ray.init.address=127.0.0.1:{port} ("), last
    assert last.endswith("start one (`ray start --head`), or name its head (hydra.launcher.ray.init.address=HOST:6379)")
    assert not [r for r in sandbox.records() if r.get("kind") == "run"]
