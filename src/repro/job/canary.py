"""Was this process slow before its first step? Its canary (backends/canary.py) against the host's.

The worker times a fixed kernel of its framework before its measured window opens and records it
(the record's top-level `canary`). The parent judges it before the record is written, from the
canary numbers alone, never a step time: against the earlier `ok` runs in the ledger of the same
kind (the same host name and CPU model, framework, compute threads, processes on the host and
kernels), it is slow where

    seconds > median(their seconds) × (1 + verdict.canary_margin)

Only runs whose window was quiet join the history (other processes at most QUIET_SHARE of a core):
in one sitting on a 2-core VM, 40 canaries of a machine shared with other work (median 3.3 ms) put the
threshold at 4.1 ms, above both slow processes of a quiet sitting after it (3.6 and 4.0 ms against
that sitting's median of 2.3 ms); a busy run is flagged by loop/rerun.py's own rule already.
With fewer than MIN_HISTORY of them nothing is flagged: the first runs on a host build its history
and say so. A slow canary flags the run (loop/rerun.py), and its round runs again under
`verdict.max_reruns`, outcome-blind. The ledger is read once per process and ledger (its index,
then each record once); the canaries of this process's own later runs are added as they are judged,
so another command's runs that end meanwhile join the history at the next command.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path

from repro.ledger.record import RecordError, view
from repro.blocks import typed

MIN_HISTORY = 5
HISTORY = 50  # the newest this many earlier canaries of a kind
READ_AT_MOST = 2000  # ok runs read (newest first) to find them, per ledger and process
QUIET_SHARE = 0.10  # loop/rerun.py's OTHER_CPU_SHARE (it imports this module): a busier window's canary is no history
BARE = 100  # ok runs in a row without a canary (recorded before it existed): none older has one

_ledgers: dict[str, "_Known"] = {}  # ledger root -> its canaries, as this process read them
_told: set[tuple] = set()  # kinds whose building history was said


@dataclass(frozen=True)
class Measured:
    """What the judge reads of a record's `canary` (worker/worker.py `canary_of`, backends/canary.py): its
    seconds and what makes its kind; once judged, the verdict's fields too (`decide`)."""

    seconds: float | None = None  # None: no canary ran
    framework: str | None = None
    threads: int | None = None
    processes: int = 1  # the run's processes on its host, each running its canary at the same time
    version: int | None = None  # the kernels' version
    history: int = 0
    median_s: float | None = None
    threshold_s: float | None = None
    margin: float | None = None
    slow: bool | None = None
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    """What `decide` adds to a canary block, in this order."""

    history: int  # how many earlier canaries it was compared to
    median_s: float | None
    threshold_s: float | None
    margin: float
    slow: bool | None  # None: too little history
    reason: str


@dataclass(frozen=True)
class _Cpu:
    model: str | None = None


def kind_of(record: dict) -> tuple | None:
    """(host, CPU model, framework, threads, processes, kernels' version) of a record's canary; None where
    it has no number."""
    try:
        rec = view(record)
        node, machine = rec.canary.raw, rec.machine
    except RecordError:  # a canary or machine that is no object
        return None
    measured = typed(Measured, node)
    if not isinstance(measured.seconds, (int, float)) or record.get("machine") is None:
        return None
    try:
        cpu = rec.environment.cpu
    except RecordError:  # an environment that is no object
        cpu = {}
    model = typed(_Cpu, cpu).model if isinstance(cpu, dict) else None
    return machine.host, model, measured.framework, measured.threads, measured.processes, measured.version


def quiet(record: dict) -> bool:
    """Whether a run's canary may join the history: other processes were quiet in its window."""
    return (view(record).machine.other_cpu_share or 0) <= QUIET_SHARE


def decide(canary: dict, history: list[float], margin: float) -> dict:
    """The canary block with its verdict: `history` (how many earlier canaries it was compared to),
    `median_s`, `threshold_s`, `margin`, `slow` (True | False | None: too little history) and `reason`."""
    n = len(history)
    if n < MIN_HISTORY:
        verdict = Verdict(n, None, None, margin, None,
                          f"canary history {n} of {MIN_HISTORY} on this host: no run flagged (building it)")
    else:
        seconds, median = typed(Measured, canary).seconds, statistics.median(history)
        threshold = median * (1 + margin)
        judged = Measured(seconds=seconds, history=n, median_s=median, threshold_s=threshold, margin=margin)
        slow = seconds > threshold
        verdict = Verdict(n, median, threshold, margin, slow, _slow(judged) if slow else
                          f"its canary took {_ms(seconds)}, within {_ms(threshold)} ({_against(judged)})")
    return {**canary, **dataclasses.asdict(verdict)}


def slow_reason(block: dict) -> str:
    return _slow(typed(Measured, block))


def _slow(judged: Measured) -> str:
    return f"its canary took {_ms(judged.seconds)} against {_against(judged)}"


def _against(judged: Measured) -> str:
    return f"this host's median {_ms(judged.median_s)} over {judged.history} runs (margin {judged.margin:g})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def history(ledger_root: str | Path, kind: tuple) -> list[float]:
    """The seconds of the newest HISTORY earlier canaries of `kind` in the ledger, oldest first."""
    root = str(Path(ledger_root).resolve())
    if root not in _ledgers:
        _ledgers[root] = _Known(Path(root))
    return _ledgers[root].seconds(kind)


def judge(record: dict, ledger_root: str | Path, margin: float, say) -> dict | None:
    """An ok run's canary block decided, before its record is written (None: nothing to judge; the record
    keeps its block as it is), and added to the history (a quiet one); `say`: how the first run of a kind
    that builds its history says so (once per kind and process)."""
    kind = kind_of(record)
    if view(record).status != "ok" or kind is None:
        return None
    measured = view(record).canary.raw
    try:
        past = history(ledger_root, kind)
    except Exception as e:  # noqa: BLE001 - the record is worth more than its canary's verdict
        return {**measured, "slow": None, "reason": f"the canary history could not be read: {e}"}
    block = decide(measured, past, margin)
    judged = typed(Measured, block)
    if judged.slow is None and kind not in _told:
        _told.add(kind)
        say(f"{kind[2]}, {kind[3]} threads: {judged.reason}")
    if quiet(record):
        _ledgers[str(Path(ledger_root).resolve())].added.append((kind, judged.seconds))
    return block


class _Known:
    """One ledger's quiet canaries as this process reads them: its ok runs newest first, each parsed once,
    as far as a kind's history needs (a ledger of runs recorded before canaries existed stops the
    reading after BARE of them in a row), then the canaries this process judged."""

    def __init__(self, root: Path):
        from repro.ledger.index import Index

        entries = [e for e in Index(root).entries() if not e.problem and e.kind == "run" and e.status == "ok"] \
            if root.is_dir() else []
        self.entries = sorted({e.id: e for e in entries}.values(), key=lambda e: e.created, reverse=True)[:READ_AT_MOST]
        self.read: list[tuple[tuple, float]] = []  # newest first
        self.at, self.bare = 0, 0
        self.added: list[tuple[tuple, float]] = []  # oldest first

    def seconds(self, kind: tuple) -> list[float]:
        from repro.ledger import recordfile

        while self.at < len(self.entries) and self.bare < BARE and sum(k == kind for k, _ in self.read) < HISTORY:
            entry, self.at = self.entries[self.at], self.at + 1
            try:
                record = recordfile.load(entry.path)
            except (recordfile.NotARecord, OSError):
                continue
            found = kind_of(record)
            self.bare = 0 if "canary" in record else self.bare + 1
            if found is not None and quiet(record):
                self.read.append((found, float(typed(Measured, view(record).canary.raw).seconds)))
        return [s for k, s in [*self.read[::-1], *self.added] if k == kind][-HISTORY:]
