"""RepeatSweeper: Hydra's basic sweeper with every job run `run.repeats` times, in rounds, each
round in the sweep loop's random order (repro/runner/sweep.py `hydra_order`, seeded by the sweep's
id, which the job processes read back to name their round and position)."""

from __future__ import annotations

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from repro.hydra_slot import HYDRA
from repro.runner.sweep import hydra_order, order_seed


class RepeatSweeper(BasicSweeper):
    def setup(self, *, hydra_context, task_function, config) -> None:
        from hydra_plugins.repro_sweeper.outcomes import wrap

        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.launcher = wrap(self.launcher)  # each job's outcome read on its own (submitit's launchers)

    def split_arguments(self, overrides, max_batch_size):  # an instance method here: it reads run.repeats
        jobs = [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
        repeats = int(self.config.run.repeats)
        if repeats > 1 and HYDRA.session is None:
            raise RuntimeError("run.repeats > 1 needs repro's session (the hydra.callbacks entry repro_sweep)")
        ordered = hydra_order(jobs, repeats, order_seed(HYDRA.session.sweep_id) if repeats > 1 else 0)
        return [list(chunk) for chunk in BasicSweeper.split_overrides_to_chunks(ordered, max_batch_size)]
