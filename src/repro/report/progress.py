"""Live progress of a sweep: rich on a terminal, plain lines otherwise.

The rich display refreshes at 4 Hz from its own thread; the parent's main thread only
updates numbers when a worker event arrives, so it costs the measured run almost nothing.
"""

from __future__ import annotations


from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


class Display:
    def __init__(self, mode: str, jobs: int | None):
        self.console = Console(stderr=False)
        self.jobs = jobs
        interactive = self.console.is_terminal
        self.mode = ("rich" if interactive else "plain") if mode == "auto" else mode
        self._progress = None
        if self.mode == "rich":
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                console=self.console, refresh_per_second=4, transient=False,
            )
            self._progress.start()
            self._sweep = self._progress.add_task("sweep", total=jobs, info="")
            self._run = None

    def _job_tag(self, job: int) -> str:
        return f"[{job + 1}/{self.jobs}]" if self.jobs else f"[{job + 1}]"

    def job_started(self, job: int, label: str, steps: int) -> None:
        if self.mode == "plain":
            print(f"{self._job_tag(job)} {label}: starting", flush=True)
        elif self._progress:
            if self._run is not None:
                self._progress.remove_task(self._run)
            self._run = self._progress.add_task(f"{self._job_tag(job)} {label}", total=steps, info="starting")

    def event(self, job: int, event: dict) -> None:
        if event["event"] != "step":
            return
        info = f"step {_ms(event['step_s'])}  loss {event['loss']:.4f}"
        if self.mode == "plain":
            if event["step"] in (1, 2) or event["step"] == event["steps"]:
                print(f"{self._job_tag(job)}   step {event['step']}/{event['steps']}  {info}", flush=True)
        elif self._progress and self._run is not None:
            self._progress.update(self._run, completed=event["step"], info=info)

    def job_finished(self, job: int, record: dict) -> None:
        results = record.get("results", {})
        note = f"steady {_ms(results.get('steady_median_s'))}" if record["status"] == "ok" else record.get("error", {}).get("reason", "")
        line = f"{self._job_tag(job)} {record['status']}: {note} (ledger {record['id']})"
        if self.mode == "plain":
            print(line, flush=True)
        elif self._progress:
            self._progress.update(self._sweep, advance=1)
            self._progress.console.print(line)

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
            self._progress = None


