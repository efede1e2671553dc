"""`--launcher srun`: inside an existing allocation (salloc, or an sbatch script a user writes),
each cell is one job step, `srun --nodes N --ntasks-per-node 1 bash -c '… torchrun …'`, on the
allocation's nodes. The parent runs on the allocation's first node and samples its srun there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import replace

from ...errors import StbenchError
from ...plan.planner import Plan
from ...plan.spec import RunSpec
from ...store.jobs import record_job
from ..processes import CellJob, Outcome, label, run_processes
from . import torchrun
from .slurm import minutes

_STEP = re.compile(r"^stbench: node 0 of job (\S+) on ", re.MULTILINE)


def allocation_nodes(env: dict[str, str]) -> int | None:
    text = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    return int(text) if text and text.isdigit() else None


def check(plan: Plan, env: dict[str, str] | None = None) -> None:
    """One line for anything that cannot work: no srun, no allocation, too few nodes in it."""
    env = dict(os.environ if env is None else env)
    if shutil.which("srun", path=env.get("PATH")) is None:
        raise StbenchError("--launcher srun needs Slurm's srun on the PATH; none found")
    if "SLURM_JOB_ID" not in env:
        raise StbenchError(
            "--launcher srun runs inside a Slurm allocation (salloc or an sbatch script); "
            "SLURM_JOB_ID is not set here (use --launcher slurm to submit jobs instead)"
        )
    have, want = allocation_nodes(env), max(c.nodes for c in plan.cells)
    if have is not None and want > have:
        raise StbenchError(
            f"--nnodes {want} is more than the {have} node(s) of allocation {env['SLURM_JOB_ID']}"
        )


def step_args(env: dict[str, str]) -> tuple[str, ...]:
    """Options a step must repeat: since Slurm 22.05 srun no longer takes --cpus-per-task from
    the allocation, and torchrun's ranks would otherwise share one CPU per node."""
    cpus = env.get("SLURM_CPUS_PER_TASK")
    return (f"--cpus-per-task={cpus}",) if cpus else ()


def command(
    spec: RunSpec,
    cell: list[str],
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> list[str]:
    env = dict(os.environ if env is None else env)
    limit = (f"--time={minutes(timeout)}",) if timeout else ()  # the one rule: slurm.minutes
    return torchrun.srun(
        spec, torchrun.slurm_node_script(spec, python, cell), step_args(env) + limit
    )


def run_cell(cell: CellJob) -> Outcome:
    cell.prepare()
    args = torchrun.cell_args(cell.spec_path, cell.result_path, cell.child_args)
    argv = command(cell.spec, args, timeout=cell.timeout)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    outcome = run_processes(cell, [argv], [env], "step", grace=15.0)
    step = _STEP.search(cell.log.read_text(errors="replace")) if cell.log.exists() else None
    if step is None:
        return outcome
    record_job(cell.folder, cell.spec.run_id, step.group(1), "srun")
    return replace(outcome, job_id=step.group(1))


def describe(plan: Plan, timeout: float | None) -> str:
    """For --dry-run: the step each cell runs inside the allocation."""
    parts = []
    for i, spec in enumerate(plan.cells, 1):
        name = f"{spec.run_id}.spec.json"
        argv = command(
            spec, torchrun.cell_args(name, f"{spec.run_id}.result.json"), "python", {}, timeout
        )
        parts.append(
            f"# cell {i}/{len(plan.cells)}: {label(spec, plan.cells)}\n"
            f"{torchrun.spec_heredoc(spec, name)}\n"
            f"{shlex.join(argv)}"
        )
    return "\n\n".join(parts) + "\n"
