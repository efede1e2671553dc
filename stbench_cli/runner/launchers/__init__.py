"""Launchers: how a cell's processes are started. One module per launcher, each with

    check(plan)               StbenchError (one line) for anything that cannot work, before
                              anything is written
    run_cell(CellJob)         start the cell, wait for it, return the Outcome the study loop
                              consumes
    describe(plan, timeout)   the commands it would use, for --dry-run (slurm's: the sbatch
                              scripts of sbatch.py)

torchrun (PyTorch's own launcher) starts every multi-process world; submitit submits Slurm jobs.
"""

from __future__ import annotations

from types import ModuleType

from . import local, sbatch, slurm, srun

_MODULES = {
    "local": local,
    "slurm": slurm,
    "srun": srun,
}  # the names of plan.launcher_config.LAUNCHERS


def get(kind: str) -> ModuleType:
    return _MODULES[kind]


def describe(plan, timeout: float | None) -> str:
    """--dry-run: what the study's launcher would run, cell by cell."""
    if plan.launch.kind == "slurm":
        return sbatch.describe(plan, timeout)
    return get(plan.launch.kind).describe(plan, timeout)
