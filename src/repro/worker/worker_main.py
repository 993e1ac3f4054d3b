"""`python -m repro.worker.worker_main [--warm BACKEND [PACKAGE ...]] SPEC.json`: how a worker starts.

A worker started ahead of its job (job/warm.py) imports its framework's own packages (the
backend's `capabilities.packages`: jax, optax, flax.nnx; torch) before any module of repro's
worker, as a bare script of that framework starts: the standard library both use (dataclasses,
inspect, typing, json, ... ~45 ms on the 2-core reference machine) is then the framework's import,
counted in the run's `setup.import_s` with the backend's, and repro's own start is what repro
alone adds (~20 ms where it was ~65). Only what must come before any thread pool exists comes
first: the pinning onto the worker's cores and the lifeline to its parent (worker/pinning.py,
worker/lifeline.py). The packages arrive on the command line, so nothing of repro is imported to
look them up. Everything else is worker/worker.py's `main`.
"""

import sys
import time


def main() -> None:
    argv = sys.argv
    first_s = None
    if len(argv) > 4 and argv[1] == "--warm":
        import importlib
        import os

        from repro.worker import lifeline, pinning

        pinning.pin_worker()
        lifeline.die_with_parent(os.path.dirname(argv[-1]), watch_stdin=False)  # its parent gone: its folder too
        t0 = time.perf_counter()
        for name in argv[3:-1]:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the backend's import raises it again, as a recorded error
                break
        first_s = time.perf_counter() - t0
    from repro.worker import worker

    worker.main(framework_first_s=first_s)


if __name__ == "__main__":
    main()
