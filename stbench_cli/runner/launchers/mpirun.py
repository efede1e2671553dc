"""`--launcher mpirun`: a cell's ranks on this machine, started by Open MPI's mpirun.

    mpirun -np WORLD --oversubscribe --bind-to none -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=P
        bash -c 'export RANK=$OMPI_COMM_WORLD_RANK …; exec python -m stbench.child.cell SPEC RESULT'

Each rank maps MPI's variables to torchrun's before it starts (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK), so the cell's process is the one every launcher starts, and
joins a gloo world at MASTER_ADDR as under torchrun. What mpirun adds is MPI_COMM_WORLD over the
same ranks: a cell of `backend=mpi4py` all-reduces DDP's gradients through it (child/ddp.py),
one of `backend=gloo` through gloo, so one study compares the two on the same world
(`--set backend=gloo,mpi4py`). One node: a multi-node MPI world (a hostfile, or mpirun inside
an allocation) is not supported yet.

mpirun is one process watched as a torchrun agent is (processes.run_processes); it ends the
job when a rank exits non-zero, and names that rank (`Process name: [[J,1],R]`, or `process
rank R … exited on signal N`), which verdict.py reads.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import replace

from ...errors import StbenchError
from ...plan.planner import Plan
from ...plan.spec import RunSpec
from ...store.cell_result import CellResult
from .. import hostprep
from ..processes import CellJob, Outcome, label, run_processes
from . import torchrun
from .local import loopback_port

# torchrun's variables from Open MPI's (the layout is one node: its local ranks are the world)
RANK_ENV = (
    "export RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE "
    "LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK LOCAL_WORLD_SIZE=$OMPI_COMM_WORLD_LOCAL_SIZE "
    "GROUP_RANK=0"
)


def command(spec: RunSpec, cell: list[str], python: str, port, prefix: tuple = ()) -> list[str]:
    """mpirun of the cell's ranks on this machine (no core binding: the cell binds its own
    threads, child/cpu.py; oversubscribed: a 2-core machine runs a world of 4)."""
    script = f"{RANK_ENV}; exec {shlex.join([*prefix, python, *cell])}"
    return [
        "mpirun",
        "-np",
        str(spec.world_size),
        "--oversubscribe",
        "--bind-to",
        "none",
        "-x",
        "MASTER_ADDR=127.0.0.1",
        "-x",
        f"MASTER_PORT={port}",
        "-x",
        "GLOO_SOCKET_IFNAME=lo",
        "bash",
        "-c",
        script,
    ]


def environment(base: dict[str, str]) -> dict[str, str]:
    """mpirun's own environment: Open MPI refuses root unless told (a container's root, CI)."""
    env = dict(base, PYTHONUNBUFFERED="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def check(plan: Plan) -> None:
    """One line for what cannot work: no mpirun, a world of several nodes, no mpi4py for a
    cell of backend=mpi4py."""
    if shutil.which("mpirun") is None:
        raise StbenchError(
            "--launcher mpirun needs Open MPI's mpirun on the PATH (Debian: apt-get install "
            "openmpi-bin libopenmpi-dev)"
        )
    if max(c.nodes for c in plan.cells) > 1:
        raise StbenchError("--launcher mpirun starts one node's ranks on this machine: --nnodes 1")
    wants = any(c.backend == "mpi4py" for c in plan.cells if c.run_id not in plan.skips)
    if wants and not _has_mpi4py():
        raise StbenchError("backend mpi4py needs mpi4py (pip install mpi4py)")


def _has_mpi4py() -> bool:
    from importlib.util import find_spec  # not imported: importing mpi4py.MPI initialises MPI

    return find_spec("mpi4py") is not None


def run_cell(cell: CellJob) -> Outcome:
    cell.prepare()
    prep = hostprep.prepare_host(cell.spec)  # the load check and the ranks' threads, as local's
    if prep.failure:
        return Outcome(CellResult("skipped", prep.failure), others_before=prep.others_cores)
    args = torchrun.cell_args(cell.spec_path, cell.result_path, cell.child_args)
    argv = command(cell.spec, args, sys.executable, loopback_port(), tuple(prep.prefix))
    env = {**environment(dict(os.environ)), **prep.env}
    outcome = run_processes(cell, [argv], [env], "mpirun", grace=3.0)
    return replace(outcome, others_before=prep.others_cores)


def describe(plan: Plan, timeout: float | None) -> str:
    """For --dry-run: each cell's mpirun."""
    parts = []
    for i, spec in enumerate(plan.cells, 1):
        name = f"{spec.run_id}.spec.json"
        cell = torchrun.cell_args(name, f"{spec.run_id}.result.json")
        parts.append(
            f"# cell {i}/{len(plan.cells)}: {label(spec, plan.cells)}\n"
            f"{torchrun.spec_heredoc(spec, name)}\n"
            + shlex.join(command(spec, cell, "python", 29500))
        )
    return "\n\n".join(parts) + "\n"
