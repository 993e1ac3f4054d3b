"""The lever table: one row per step of run.sh, read back from each step's own ledger.

    .venv/bin/python experiments/instrument/table.py OUT [OUT2 ...]

Per step (a folder OUT/<step>/ledger holding one `repro calibrate`'s records): the config, the
levers it ran with (read from its calibration record's protocol and its runs' configs), the
median steady steps of a run, the noise of a verdict's unit (report/noise.py, the numbers
calibrate prints), the position effect, the false "faster" verdicts or the power, and the median
wall of one run. Nothing here is computed twice: `noise.summarise` is calibrate's own summary.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from repro.ledger import Ledger
from repro.report import noise
from repro.report.reruns import kept, rerun_rounds


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def row(step: str, ledger: Path) -> dict | None:
    heads = Ledger(ledger).heads()
    runs = [r for r in heads if r.get("calibration")]
    (cal,) = [r for r in heads if r.get("kind") == "calibration"] or [None]
    ok = [r for r in kept(runs) if r.get("status") == "ok"]
    if not ok or cal is None or cal.get("status") != "ok":  # a step stopped before it measured anything
        return None
    s = noise.summarise(ok)
    config = ok[0]["config"]
    proto = cal["protocol"]
    steps = statistics.median(r["results"].get("steady_steps") or 0 for r in ok if r.get("results"))
    order = next((o for o in s["order"] if o.get("position") == 1), None)
    return {
        "step": step, "config": f"{config['framework']['name']} {config['model']['name']} {config['model']['preset']}",
        "steps": "auto" if config["run"]["steps"] == "auto" else config["run"]["steps"], "steady": steps,
        "window": "quiet" if proto.get("quiet_window", True) else "loud", "order": proto.get("order", "random"),
        "reruns": config["verdict"]["max_reruns"], "rerun_rounds": rerun_rounds(runs),
        "runs": len(ok), "noise": s["noise"], "paired": s["paired_noise"], "sampling": s["sampling_sd"],
        "position": order, "false": s["false"], "gap": s["gap"],
        "run_wall_s": statistics.median(r["wall_s"] for r in ok if r.get("wall_s")),
    }


def main(outs: list[str]) -> None:
    print("| step | config | steps (steady) | window | order | reruns (rounds rerun) | runs | run-to-run | paired | "
          "sampling sd | position 1 − 0 (95 % CI) | false faster / power | wall a run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for out in outs:
        for folder in sorted(Path(out).iterdir()):
            if not (folder / "ledger").is_dir() or (r := row(folder.name, folder / "ledger")) is None:
                continue
            pos = r["position"]
            pos_text = "—" if not pos else f"{100 * pos['mean']:+.2f} % ({100 * pos['lo']:+.2f} to {100 * pos['hi']:+.2f})"
            if r["gap"]:
                g = r["gap"]
                verdicts = (f"power {g['power']['k']}/{g['power']['n']} (CI {100 * g['power']['lo']:.0f}–"
                            f"{100 * g['power']['hi']:.0f} %), wrong {g['wrong']['k']}, rounds {g['rounds_median']}")
            elif r["false"]:
                f = r["false"]
                verdicts = f"{f['k']}/{f['n']} (CI {100 * f['lo']:.0f}–{100 * f['hi']:.0f} %)"
            else:
                verdicts = "—"
            print(f"| {r['step']} | {r['config']} | {r['steps']} ({r['steady']:.0f}) | {r['window']} | {r['order']} | "
                  f"{r['reruns']} ({r['rerun_rounds']}) | {r['runs']} | {_pct(r['noise'])} | {_pct(r['paired'])} | "
                  f"{_pct(r['sampling'])} | {pos_text} | {verdicts} | {r['run_wall_s']:.2f} s |")


if __name__ == "__main__":
    main(sys.argv[1:])
