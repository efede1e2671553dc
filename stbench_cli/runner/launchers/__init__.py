"""Launchers: how a cell's processes are started. One module per launcher, each with

    check(plan)               StbenchError (one line) for anything that cannot work, before
                              anything is written
    run_cell(CellJob)         start the cell, wait for it, return the Outcome the study loop
                              consumes
    describe(plan, timeout)   the commands it would use, for --dry-run (slurm's: the sbatch
                              scripts of sbatch.py)
    opened(plan)              (dask only) a context manager: what the study's cells share, the
                              Dask cluster, opened before the first cell and closed after the last

torchrun (PyTorch's own launcher) starts every multi-process world but those of Dask (a task per
rank) and mpirun (Open MPI's); submitit submits Slurm jobs.
"""

from __future__ import annotations

from contextlib import nullcontext
from types import ModuleType

from . import dask_world, local, mpirun, sbatch, slurm, srun

_MODULES = {
    "local": local,
    "slurm": slurm,
    "srun": srun,
    "dask": dask_world,
    "mpirun": mpirun,
}  # the names of plan.launcher_config.LAUNCHERS


def get(kind: str) -> ModuleType:
    return _MODULES[kind]


def opened(plan):
    """What the study's launcher keeps open across its cells (CellJob.session), or None."""
    module = get(plan.launch.kind)
    return module.opened(plan) if hasattr(module, "opened") else nullcontext()


def describe(plan, timeout: float | None) -> str:
    """--dry-run: what the study's launcher would run, cell by cell."""
    if plan.launch.kind == "slurm":
        return sbatch.describe(plan, timeout)
    return get(plan.launch.kind).describe(plan, timeout)
