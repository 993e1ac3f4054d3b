"""Which launcher runs a sweep's rounds: one enum, parsed once from `hydra.launcher._target_`.

Hydra only composes: whatever the choice, the sweep loop (loop/sweep.py) runs the sweep and hands
each round to the launcher's adapter (loop/rounds.py; `repro.api.launcher_for` picks it), which
takes its parameters from the composed `hydra.launcher` node (`repro.api.launcher_node`). The preflight parses
the kind (`Plan.launcher`) and every caller asks the enum (`in_process`, `slurm`) instead of matching
the class name as a string. An unknown launcher is refused by name.

Adding a launcher: its `_target_` here (the member's name is its `hydra/launcher=` choice; a Hydra
launcher plugin's config group gives the node), and its adapter, one file in loop/
(docs/how-to/slurm.md, 'Writing an adapter').
"""

from __future__ import annotations

import enum

from repro.config.schema import ConfigError


class Launcher(enum.Enum):
    """Member name (lower-cased): the `hydra/launcher=` choice; value: the class Hydra instantiates."""

    BASIC = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    SUBMITIT_LOCAL = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
    SUBMITIT_SLURM = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"

    @classmethod
    def parse(cls, target: str | None) -> "Launcher":
        """The kind of `hydra.launcher._target_` ("" or None: no Hydra config, a run in this process)."""
        if not target:
            return cls.BASIC
        for kind in cls:
            if kind.value == target:
                return kind
        raise ConfigError(f"hydra.launcher._target_={target!r} is a launcher repro does not know; choose "
                          f"hydra/launcher={', '.join(k.choice for k in cls)} (a new one is added in "
                          "src/repro/config/launcher.py)")

    @property
    def choice(self) -> str:
        """Its name in `hydra/launcher=NAME`."""
        return self.name.lower()

    @property
    def in_process(self) -> bool:
        """The rounds run in the command's own process (`hydra/launcher=basic`, the default)."""
        return self is Launcher.BASIC

    @property
    def slurm(self) -> bool:
        """The jobs run on SLURM nodes (SLURM's variables exist there, not where the sweep starts)."""
        return self is Launcher.SUBMITIT_SLURM
