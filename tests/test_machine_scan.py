"""The machine's process trees (worker/machine.py): each snapshot around a measured loop scans the
host's processes once, and every tree it reads (the run's, the command's, the projectors', the
worker's own) comes from that one scan."""

from __future__ import annotations

import os

from repro.worker import machine


def test_a_tree_holds_every_descendant_at_any_depth_and_nothing_else(monkeypatch):
    # 1 ─ 10 ─ 11 ─ 12      1 ─ 20      (0 is its own parent on some platforms: not a child of itself)
    monkeypatch.setattr(machine, "_ppid_map", lambda: {0: 0, 1: 0, 10: 1, 11: 10, 12: 11, 20: 1})
    tree = machine._Tree()
    assert sorted(tree.descendants(10)) == [11, 12]
    assert sorted(tree.descendants(11)) == [12]
    assert tree.descendants(12) == [] and tree.descendants(99) == []
    assert sorted(tree.descendants(1)) == [10, 11, 12, 20]


def test_the_real_scan_finds_this_process_under_its_parent():
    tree = machine._Tree()
    assert os.getpid() in tree.descendants(os.getppid())
    assert os.getpid() not in tree.descendants(os.getpid())


def test_each_snapshot_scans_the_host_once(monkeypatch):
    scans = []
    real = machine._ppid_map
    monkeypatch.setattr(machine, "_ppid_map", lambda: scans.append(1) or real())
    monkeypatch.setattr(machine, "MIN_WINDOW_S", 0.0)  # after() reads at once
    early = machine.early(os.getppid())
    assert len(scans) == 1
    start = machine.before(os.getppid(), early)
    assert len(scans) == 2  # its GPUs' own-process set and its counters from the same scan
    record = machine.after(start, threads=1)
    assert len(scans) == 3  # the run's, the command's and the projectors' trees, and the GPUs after
    assert record["window_from"] in ("first step", "worker start") and set(record["repro_cpu_parts_s"]) == {"command", "projectors"}
