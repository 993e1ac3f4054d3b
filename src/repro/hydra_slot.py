"""What crosses Hydra's boundary during one `hydra_main()`: the checked plan in, the session out.

A module-level slot, forced by Hydra: Hydra instantiates `SweepCallback` (repro/hydra_callback.py)
from conf/config.yaml's hydra.callbacks and calls `app.task(cfg)` with the composed config
alone, so neither can be handed an object. `hydra_sweep(plan)` fills the slot for one call and
empties it on the way out. Only the Hydra path uses it: `repro.api` and replay make their
sessions directly.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


@dataclass
class HydraSweep:
    plan: object = None  # preflight.Plan, checked before Hydra ran
    session: object = None  # repro.session.Session, opened by the callback

    def close(self, interrupted: bool = False) -> list[dict]:
        """Close the open session (if still open); its records."""
        if self.session is None:
            return []
        if not self.session.closed:
            self.session.close(interrupted)
        return self.session.records


HYDRA = HydraSweep()


@contextmanager
def hydra_sweep(plan) -> Iterator[HydraSweep]:
    """`with hydra_sweep(plan) as sweep: hydra_main()`; then `sweep.session` is the closed session."""
    HYDRA.plan, HYDRA.session = plan, None
    try:
        yield HYDRA
    finally:
        HYDRA.plan, HYDRA.session = None, None
