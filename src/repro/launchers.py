"""Which Hydra launcher runs a sweep's jobs: one enum, parsed once from the launcher's `_target_`."""

from __future__ import annotations

from enum import Enum


class Launcher(Enum):
    BASIC = "BasicLauncher"  # Hydra's default: the jobs run in this process, one after the other
    JOBLIB = "JoblibLauncher"
    SUBMITIT_LOCAL = "LocalLauncher"
    SUBMITIT_SLURM = "SlurmLauncher"

    @classmethod
    def of(cls, target: str) -> "Launcher":
        """The launcher a `hydra.launcher._target_` names ("" or None: Hydra's basic one)."""
        name = (target or "").rsplit(".", 1)[-1] or cls.BASIC.value
        for kind in cls:
            if kind.value == name:
                return kind
        raise ValueError(f"hydra.launcher {target!r} is not a launcher repro knows; use one of "
                         "basic (the default), joblib, submitit_local, submitit_slurm")

    @property
    def runs_here(self) -> bool:
        """Whether the jobs run in the command's own process (else each in a process the launcher starts)."""
        return self is Launcher.BASIC
