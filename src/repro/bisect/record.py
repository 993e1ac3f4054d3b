"""A bisection's ledger record (kind "bisect"), written as it goes, and a bisection resumed from it.

The ledger never rewrites a record: each step is a new record naming the one before (`prev`),
so the chain's head is the bisection's state. A step is written when the confirmation ends and
when each probe ends (status "running"), and once more when the bisection ends: "decided" (one
position holds the posterior's threshold), "undecided" (the budget or the candidates ran out),
"non-monotone", "not reproduced", "failed" or "interrupted". Every step carries the whole state:
the endpoints, the positions and their labels, the confirmation and each probe with the ids of
its runs, the posterior, the time spent and the sweeps that ran them.

`repro bisect GOOD BAD` run again with the same endpoints and overrides finds the chain whose head
is not final (`resumable`) and goes on from it: the confirmation and the finished probes are not
run again (the posterior is rebuilt from them, `search.Search.replay`); a probe cut short runs again.
"""

from __future__ import annotations

import hashlib
import json
import math

from repro.bisect.candidates import Walk
from repro.ledger import Ledger
from repro.ledger.record import view

KIND = "bisect"
RUNNING = "running"
FINAL = ("decided", "undecided", "non-monotone", "not reproduced", "failed")  # "interrupted" resumes


# Overrides that change what a bisection may spend, where it is recorded or how it is shown, not what it
# measures: no part of which bisection it is.
NOT_MEASURED = ("bisect.", "tracking.", "progress.")


def key_of(good: str, bad: str, overrides: list[str]) -> str:
    """What names one bisection across its runs: its endpoints and its config overrides, but for NOT_MEASURED
    (`bisect.*`: what it may spend, as --budget-s and --max-rounds: run again with a larger budget, it resumes;
    `tracking.*`, `progress.*`: where MLflow has it, how its progress is shown). Where its rounds run
    (`hydra/launcher=...`) is no config override (cli.run keeps it apart), so no part of it either."""
    measured = sorted(o for o in overrides if not o.lstrip("+~").startswith(NOT_MEASURED))
    return hashlib.sha256(json.dumps([good, bad, measured]).encode()).hexdigest()[:16]


def resumable(ledger: Ledger, key: str) -> dict | None:
    """The head of an unfinished bisection with this key (None: none)."""
    heads = [r for r in ledger.heads(kind=KIND) if view(r).bisect.key == key and view(r).status not in FINAL]
    return heads[-1] if heads else None


class Bisection:
    """What is known of one bisection (confirmation, probes, posterior), and its records."""

    def __init__(self, ledger: Ledger, good: dict, bad: dict, walk: Walk, overrides: list[str], cap: int,
                 budget_s: float | None, say, resumed: dict | None = None):
        from repro.bisect import search

        self.ledger, self.good, self.bad, self.walk, self.say = ledger, good, bad, walk, say
        self.overrides, self.cap, self.budget_s = list(overrides), cap, budget_s
        self.key = key_of(view(good).id, view(bad).id, self.overrides)
        self.rates = search.DEFAULT_RATES
        self.search = search.Search(walk.n, self.rates)
        self.confirmation: dict | None = None
        self.probes: list = []  # search.Probe, in the order run
        self.levels: list[float] = []  # each probe's interval's confidence (decide.Call.level)
        self.spent_before, self.sweeps, self.head, self.status, self.reason = 0.0, [], None, RUNNING, ""
        self.max_probes = math.ceil(math.log2(max(walk.n, 2))) + 2
        if resumed:
            b, typed = resumed["bisect"], view(resumed).bisect
            self.head, self.confirmation = resumed, b.get("confirmation")
            self.probes = [search.Probe.from_dict({k: v for k, v in p.items() if k != "label"})
                           for p in b.get("probes", [])]
            self.levels = [float(p.level) for p in typed.probes]
            self.search = search.Search.replay(walk.n, self.rates, self.probes)
            self.spent_before, self.sweeps = float(typed.spent_s), list(typed.sweeps)

    # -- what comes next -------------------------------------------------------------------------
    @property
    def gap(self) -> float:
        return float(self.confirmation["ratio"]) - 1.0

    def next_probe(self) -> int | None:
        """The position to run next: BAD (the confirmation) first, then the search's choice; None: done."""
        if self.confirmation is None:
            return self.walk.n
        if self.confirmation["outcome"] != "reproduces":
            return None
        if self.search.decided() or self.search.nonmonotone():
            return None
        return self.search.next()

    def why_stopped(self) -> str:
        if self.confirmation is not None and self.confirmation["outcome"] != "reproduces":
            return "not reproduced"
        if self.search.nonmonotone():
            return "non-monotone"
        if self.search.decided():
            return "decided"
        return "no position is left to probe"

    def stopped(self, reason: str, host) -> None:
        self.reason = reason

    # -- as probes end ---------------------------------------------------------------------------
    def confirmed(self, call, runs: list[str], spent: float, host) -> None:
        self.confirmation = {"outcome": call.outcome, "ratio": call.ratio, "lo": call.lo, "hi": call.hi,
                             "level": call.level, "rounds": call.rounds, "sentence": call.sentence, "runs": list(runs)}
        ci = f"{100 * call.level:.3g} % CI {call.lo:.2f}–{call.hi:.2f}"
        if call.outcome == "reproduces":
            self.say(f"the gap reproduces here: BAD/GOOD {call.ratio:.2f} ({ci}) over {call.rounds} rounds")
        else:
            self.say(f"the gap does not reproduce here: BAD/GOOD {call.ratio:.2f} ({ci}) over {call.rounds} rounds; "
                     "nothing to bisect")
        self.write(RUNNING, spent, host)

    def probed(self, position: int, call, runs: list[str], spent: float, host) -> None:
        from repro.bisect import search

        probe = search.Probe(position, call.outcome, call.ratio, call.lo, call.hi, call.rounds, tuple(runs))
        self.probes.append(probe)
        self.levels.append(call.level)
        self.search.update(probe)
        label = self.walk.candidates[position].label
        best = max(range(len(self.search.posterior)), key=lambda i: self.search.posterior[i])
        self.say(f"probe {len(self.probes)}: position {position} ({label}): {_word(call.outcome)}, "
                 f"{call.ratio:.3f}× GOOD ({100 * call.level:.3g} % CI {call.lo:.3f}–{call.hi:.3f}) over {call.rounds} rounds; "
                 f"most likely culprit position {best + 1} ({self.search.posterior[best]:.2f})")
        self.write(RUNNING, spent, host)

    def ended(self, host, error: BaseException | None, spent: float) -> None:
        if error is not None:
            self.write("interrupted" if isinstance(error, KeyboardInterrupt) else "failed", spent, host,
                       reason=f"{type(error).__name__}: {error}" if not isinstance(error, KeyboardInterrupt)
                       else "interrupted (Ctrl-C or SIGTERM)")
            return
        if self.reason.startswith("a run of position"):
            status = "failed"
        elif self.confirmation is not None and self.confirmation["outcome"] != "reproduces":
            status = "not reproduced"
        elif self.search.nonmonotone():
            status = "non-monotone"
        elif self.search.decided():
            status = "decided"
        else:
            status = "undecided"
        self.write(status, spent, host, reason=self.reason or self.why_stopped())

    # -- the record ------------------------------------------------------------------------------
    def runs(self) -> list[str]:
        ids = list((self.confirmation or {}).get("runs", []))
        for p in self.probes:
            ids += list(p.runs)
        return ids

    def result(self) -> dict | None:
        """The culprit (decided), or the two positions of a non-monotone history; None otherwise."""
        if (both := self.search.nonmonotone()) is not None:
            bad, good = both
            return {"nonmonotone": [bad, good], "labels": [self.walk.candidates[bad].label,
                                                            self.walk.candidates[good].label]}
        if self.confirmation is None or (decided := self.search.decided()) is None:
            return None
        position, posterior = decided
        at = next((i for i in reversed(range(len(self.probes)))
                   if self.probes[i].position == position and self.probes[i].outcome == "bad"), None)
        gap = {"ratio": self.probes[at].ratio, "lo": self.probes[at].lo, "hi": self.probes[at].hi,
               "level": self.levels[at], "from": f"position {position} against GOOD"} if at is not None else \
            {k: self.confirmation.get(k, 0.95) for k in ("ratio", "lo", "hi", "level")} | \
            {"from": "BAD against GOOD (the confirmation)"}
        return {"position": position, "label": self.walk.candidates[position].label,
                "commits": self.walk.candidates[position].commits, "posterior": posterior, **gap}

    def write(self, status: str, spent: float, host, reason: str = "") -> dict:
        self.status, self.reason = status, reason or self.reason
        sweep = getattr(host, "sweep_id", None)
        if sweep and sweep not in self.sweeps:
            self.sweeps.append(sweep)
        body = {
            "kind": KIND, "status": status, "config_hash": view(self.good).config_hash,
            **({"prev": view(self.head).id} if self.head else {}),
            "bisect": {
                "key": self.key, "good": view(self.good).id, "bad": view(self.bad).id, "overrides": self.overrides,
                "cap": self.cap, "budget_s": self.budget_s, "threshold": self.search.threshold,
                "rates": {"false_bad": self.rates.false_bad, "false_good": self.rates.false_good},
                "n": self.walk.n,
                "positions": [{"position": c.position, "label": c.label, "commits": c.commits}
                              for c in self.walk.candidates],
                "ranges": [{"what": w, "repo": r, "span": s, "commits": [c.sha or c.subject for c in cs]}
                           for w, r, s, cs in self.walk.ranges],
                "confirmation": self.confirmation,
                "probes": [{**p.to_dict(), "label": self.walk.candidates[p.position].label, "level": level}
                           for p, level in zip(self.probes, self.levels)],
                "posterior": list(self.search.posterior),
                "result": self.result(), "reason": self.reason, "spent_s": round(spent, 1),
                "sweeps": self.sweeps,
            },
            "runs": self.runs(),
        }
        self.head = self.ledger.append(body)
        return self.head


def _word(outcome: str) -> str:
    return {"good": "like-good", "bad": "like-bad"}.get(outcome, outcome)
