"""Live progress of a sweep: rich on a terminal, plain lines otherwise.

The rich display redraws from its own thread, 4 times a second, but at most once a second
while a worker's measured window is open (between its `measure_start` and `window_end`
events); the parent's main thread only updates numbers when a worker event arrives (at most
one step event a second), so it costs the measured run almost nothing.
Plain mode (logs: CI, nohup, SLURM) prints the first (compile) step, then a line at most
every `progress.interval_s` with the step, its time, the loss and an ETA, and the last step.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from repro.config.schema import ProgressConfig
from repro.console import live
from repro.ledger.record import view
from repro.usertext import markup, shown


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    seconds = round(seconds)
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Display:
    def __init__(self, mode: str, jobs: int | None, interval_s: float | None = None, clock=time.monotonic):
        """`interval_s`: plain mode's most frequent line (None: the schema's default, for configs
        recorded before the key existed); `clock`: seconds, for the ETA."""
        self.console = Console(stderr=False)
        self.jobs = jobs
        self.interval_s = ProgressConfig.interval_s if interval_s is None else interval_s
        self._clock = clock
        self._job_start = self._last_line = self._first_done = 0.0
        interactive = self.console.is_terminal
        self.mode = ("rich" if interactive else "plain") if mode == "auto" else mode
        self._progress = None
        if self.mode == "rich":
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                console=self.console, auto_refresh=False, transient=False,
            )
            self._progress.start()
            live(self.console)  # notices and other prints meanwhile go above the live lines
            self._redraws = Redraws(self._progress.refresh)
            self._sweep = self._progress.add_task("sweep", total=jobs, info="")
            self._run = None

    def expect(self, jobs: int) -> None:
        """The sweep will run at most this many jobs (a rerun round adds to them)."""
        self.jobs = jobs
        if self._progress:
            self._progress.update(self._sweep, total=jobs)

    def _job_tag(self, job: int) -> str:
        return f"[{job + 1}/{self.jobs}]" if self.jobs else f"[{job + 1}]"

    def job_started(self, job: int, label: str, steps: int | str) -> None:
        """`steps`: `run.steps`, a count or auto (the worker's step events then tell the total)."""
        steps = steps if isinstance(steps, int) else None
        if self.mode == "plain":
            self._job_start = self._clock()
            print(f"{self._job_tag(job)} {shown(label)}: starting", flush=True)
        elif self._progress:
            if self._run is not None:
                self._progress.remove_task(self._run)
            self._run = self._progress.add_task(f"{markup(self._job_tag(job))} {markup(label)}", total=steps, info="starting")

    def event(self, job: int, event: dict) -> None:
        if event["event"] in ("measure_start", "window_end") and self._progress:
            self._redraws.window_open = event["event"] == "measure_start"
        if event["event"] != "step":
            return
        info = f"step {_ms(event['step_s'])}  loss {event['loss']:.4f}"
        if self.mode == "plain":
            self._plain_step(job, event, info)
        elif self._progress and self._run is not None:
            self._progress.update(self._run, completed=event["step"], total=event["steps"], info=info)

    def _plain_step(self, job: int, event: dict, info: str) -> None:
        step, steps, now = event["step"], event["steps"], self._clock()
        if step == 1:  # tracing and compilation: its own line, and the clock for the ETA starts after it
            self._first_done = self._last_line = now
            print(f"{self._job_tag(job)}   step 1/{steps} (compile)  {info}", flush=True)
            return
        if step != steps and now - self._last_line < self.interval_s:
            return
        self._last_line = now
        per_step = (now - self._first_done) / (step - 1)
        eta = f"  ETA {_duration(per_step * (steps - step))}" if step != steps else ""
        print(f"{self._job_tag(job)}   step {step}/{steps}  {info}  elapsed {_duration(now - self._job_start)}{eta}",
              flush=True)

    def job_finished(self, job: int, record: dict, in_ledger: bool = True) -> None:
        """`in_ledger=False`: the record is only spooled (the ledger's disk refused it)."""
        rec = view(record)
        note = f"steady {_ms(rec.results.steady_median_s)}" if rec.status == "ok" else rec.error.get("reason", "")
        where = f"ledger {rec.id}" if in_ledger else "spooled, not yet in the ledger; run `repro ledger recover`"
        line = f"{self._job_tag(job)} {rec.status}: {note} ({where})"
        if self.mode == "plain":
            print(shown(line), flush=True)
        elif self._progress:
            self._redraws.window_open = False
            self._progress.update(self._sweep, advance=1)
            self._progress.console.print(markup(line), highlight=False)

    def close(self) -> None:
        if self._progress:
            live(None)
            self._redraws.stop()
            self._progress.stop()
            self._progress = None


class Redraws:
    """Calls `redraw` every EVERY_S seconds from a thread of its own, every WINDOW_EVERY_S while
    `window_open` (a worker measures: the terminal's redraws are this process's CPU beside it)."""

    EVERY_S, WINDOW_EVERY_S = 0.25, 1.0

    def __init__(self, redraw) -> None:
        self.window_open = False
        self._redraw, self._stop = redraw, threading.Event()
        self._thread = threading.Thread(target=self._run, name="repro-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.WINDOW_EVERY_S if self.window_open else self.EVERY_S):
            self._redraw()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
