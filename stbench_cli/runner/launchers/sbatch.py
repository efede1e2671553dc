"""Printed sbatch scripts (`stbench run … --launcher slurm --dry-run`), for clusters where no
process may stay on the login node: each cell's job as a self-contained script, and one script
that runs the whole study inside a single allocation with `--launcher srun`. Writes nothing."""

from __future__ import annotations

import shlex

from ...device import is_cuda
from ...plan.planner import Plan
from ..processes import label
from . import torchrun
from .slurm import job_options, minutes


def header(opts: dict[str, object]) -> str:
    lines = ["#!/bin/bash"]
    for key, value in opts.items():
        if key == "mem_gb":
            key, value = "mem", f"{value}G"
        lines.append(f"#SBATCH --{key.replace('_', '-')}={shlex.quote(str(value))}")
    return "\n".join(lines)


def cell_script(plan: Plan, index: int, timeout: float | None, python: str = "python") -> str:
    spec = plan.cells[index]
    opts = job_options(spec, plan.launch, timeout)
    name = f"{spec.run_id}.spec.json"
    cpus = (f"--cpus-per-task={opts['cpus_per_task']}",) if "cpus_per_task" in opts else ()
    script = torchrun.slurm_node_script(
        spec, python, torchrun.cell_args(name, f"{spec.run_id}.result.json")
    )
    step = torchrun.srun(spec, script, cpus)
    return (
        f"# cell {index + 1}/{len(plan.cells)}: {label(spec, plan.cells)}\n{header(opts)}\n"
        f"{torchrun.spec_heredoc(spec, name)}\n{shlex.join(step)}"
    )


def as_srun(argv: list[str]) -> list[str]:
    """The study's own command line, run with --launcher srun (no --slurm, no --dry-run)."""
    out, skip = ["stbench"], False
    for i, tok in enumerate(argv[1:], 1):
        if skip:
            skip = False
        elif tok == "--dry-run" or tok.startswith("--slurm="):
            continue
        elif tok == "--slurm":
            skip = True
        elif tok.startswith("--launcher="):
            out.append("--launcher=srun")
        elif argv[i - 1] == "--launcher":
            out.append("srun")
        else:
            out.append(tok)
    return out if "--launcher" in out or "--launcher=srun" in out else out + ["--launcher", "srun"]


def study_script(plan: Plan, timeout: float | None) -> str:
    cells = [c for c in plan.cells if c.run_id not in plan.skips] or list(plan.cells)
    opts: dict[str, object] = {
        "job_name": f"stbench-{plan.workload.name}",
        "nodes": max(c.nodes for c in cells),
        "ntasks_per_node": 1,
    }
    if timeout is not None:
        opts["time"] = sum(minutes(timeout) for _ in cells)
    if any(is_cuda(c.device) for c in cells):
        opts["gpus_per_node"] = max(c.nproc_per_node for c in cells)
    opts.update(plan.launch.options)
    command = (
        as_srun([str(a) for a in plan.manifest.get("command", [])])
        if plan.manifest.get("command")
        else []
    )
    return (
        "# Or, with no process left on the login node: one allocation runs the whole study, "
        f"cell by cell (sbatch this)\n{header(opts)}\n{shlex.join(command)}"
    )


def describe(plan: Plan, timeout: float | None) -> str:
    parts = [cell_script(plan, i, timeout) for i in range(len(plan.cells))]
    return "\n\n".join([*parts, study_script(plan, timeout)]) + "\n"
