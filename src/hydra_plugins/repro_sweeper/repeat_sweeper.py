"""RepeatSweeper: Hydra's basic sweeper with every job run `run.repeats` times, interleaved
(A B C, A B C, ...). The ordering lives in repro.sweeper, shared with the preflight plan."""

from __future__ import annotations

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from repro.sweeper import interleave


class RepeatSweeper(BasicSweeper):
    def split_arguments(self, overrides, max_batch_size):  # an instance method here: it reads run.repeats
        jobs = [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
        ordered = interleave(jobs, int(self.config.run.repeats))
        return [list(chunk) for chunk in BasicSweeper.split_overrides_to_chunks(ordered, max_batch_size)]
