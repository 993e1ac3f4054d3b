"""How a stored record's blocks read (ledger/render.py): the scheduler block as one line, as MLflow
tags and as where a run ran; the wall split's parts. The read side renders them, so report/, ledger/,
tracking/ and replay import nothing of job/ for it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from repro.ledger import recordfile, render

SRC = Path(__file__).resolve().parents[1] / "src" / "repro"

SLURM = {"name": "slurm", "cluster": "c", "job_id": "12", "array_job_id": "11", "array_task_id": "1", "step_id": "0",
         "nodes": "n[1-2]", "node": "n1", "partition": "both", "account": "acct", "qos": "normal",
         "resources": {"cpus": "4", "gpus": "1", "mem": "8G"}, "stdout": "/logs/12.out", "attempt": 2}
RAY = {"name": "ray", "job_id": "01000000", "task_id": "ab12", "node": "host1", "address": "127.0.0.1:6379"}


def test_local_and_a_missing_block_read_local():
    assert render.scheduler({"name": "local"}) == "local"
    assert render.scheduler(None) == render.scheduler({}) == "local"


def test_slurm_reads_as_it_always_did():
    assert render.scheduler(SLURM) == ("slurm job 12 (array 11_1) step 0 · nodes n[1-2] · partition both · account acct"
                                       " · qos normal · cpus=4 gpus=1 mem=8G · attempt 2 · log /logs/12.out")
    assert render.scheduler({"name": "slurm", "job_id": "7", "step_id": "batch", "attempt": 1}) == "slurm job 7 step batch"


def test_any_other_scheduler_names_itself_its_job_and_node_in_one_line():
    assert render.scheduler(RAY) == "ray job 01000000 · task ab12 · node host1 · address 127.0.0.1:6379"
    # no job id: the name first, then its node(s), then the rest in its order; empty values left out, a nested block flattened
    assert render.scheduler({"name": "k8s", "pod": "p-1", "namespace": "", "resources": {"gpus": 2}, "nodes": ["a", "b"]}) \
        == "k8s · nodes a,b · pod p-1 · resources gpus=2"
    assert "\n" not in render.scheduler(RAY)
    stored = json.loads(recordfile.dumps({"scheduler": RAY}))["scheduler"]  # as a record file holds it: keys sorted
    assert list(stored) != list(RAY) and render.scheduler(stored) == render.scheduler(RAY)


def test_tags_and_where():
    assert render.scheduler_tags(None) == {"repro.scheduler": "local"}
    tags = render.scheduler_tags(SLURM)
    assert tags["repro.scheduler"] == "slurm" and tags["repro.scheduler.resources.gpus"] == "1"
    assert tags["repro.scheduler.attempt"] == "2"
    assert render.scheduler_tags(RAY)["repro.scheduler.task_id"] == "ab12"
    assert render.scheduler_where(SLURM) == {"name": "slurm", "cluster": "c", "partition": "both", "nodes": "n[1-2]",
                                             "resources": SLURM["resources"]}
    assert render.scheduler_where(None) == {"name": "local"}


def test_the_wall_parts_are_the_splits_parts():
    from repro.job import wall_split

    t0 = 1000.0
    events = {"hello": {"at": t0 + 1}, "environment": {"at": t0 + 2}, "measure_start": {"at": t0 + 3},
              "measure_end": {"at": t0 + 8}, "result": {"at": t0 + 9, "results": {
                  "first_step_s": 1.0, "setup": {"data_s": 0.1, "build_s": 0.2, "import_s": 0.3, "profile_s": 0.1}}}}
    assert set(wall_split.split(events, t0, 10.0)["parts"]) <= set(render.WALL_PARTS)


def test_readers_import_no_job_module_to_render_a_block():
    readers = [*(SRC / "report").rglob("*.py"), *(SRC / "ledger").rglob("*.py"), *(SRC / "tracking").rglob("*.py"),
               SRC / "replay.py"]
    for path in readers:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in ("repro.job.scheduler", "repro.job.wall_split"):
                raise AssertionError(f"{path.relative_to(SRC)} imports {node.module}")
            if isinstance(node, ast.ImportFrom) and node.module == "repro.job":
                names = {a.name for a in node.names}
                assert not names & {"wall_split"} and (path.name == "replay.py" or "scheduler" not in names), path


def test_a_busy_window_names_the_hypervisors_steal_where_it_is_all_of_the_other_cpu():
    """`other_cpu_share` counts the hypervisor's steal too: where the steal is all of it, the rerun's
    and the audit's reason says steal, not other processes (the quickstart's round 2 was rerun for
    'other processes took 0.17 of a core' while the steal was 0.21 and nothing else ran)."""
    from repro.loop.rerun import flag
    from repro.report.audit import busy

    stolen = {"kind": "run", "machine": {"other_cpu_share": 0.168, "steal_share": 0.208, "window_from": "first step"}}
    assert flag(stolen) == "the hypervisor gave 0.21 of a core to another tenant (steal) during its window (bound 0.1)"
    assert busy(stolen).startswith("the hypervisor gave 0.21 of a core to another tenant (steal) during the timed loop")
    both = {"kind": "run", "machine": {"other_cpu_share": 0.5, "steal_share": 0.2}}
    assert flag(both).startswith("other processes took 0.50 of a core, 0.20 of it the hypervisor's steal during")
    assert flag({"kind": "run", "machine": {"other_cpu_share": 0.5}}).startswith("other processes took 0.50 of a core")
    assert flag({"kind": "run", "machine": {"other_cpu_share": 0.05, "steal_share": 0.3}}) is None  # the bound is unchanged
