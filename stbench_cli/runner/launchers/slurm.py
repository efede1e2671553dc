"""`--launcher slurm`: one Slurm job per cell, submitted and watched through submitit.

The job has one task per node; each task runs its node's torchrun agent (see
`torchrun.slurm_node_script`), node rank from `$SLURM_NODEID`, the step's first host as the
static rendezvous address, so rank 0 is always on the first node. Rank 0 writes the result into
the study folder (a shared file system), where the parent reads it. The job id goes into
jobs.json the moment the job exists: a parent killed meanwhile re-attaches on `--resume`, never
submitting the cell twice. A job that Slurm kills or fails becomes a row with sacct's state and
what failed first: `srun --kill-on-bad-exit=1` ends the step when one node's task ends non-zero,
and its `srun: error: HOST: task N: …` line names the node (verdict.py). The ranks' beats reach
the parent through the shared folder: a job whose ranks stop making progress is cancelled as
hung (the stall clock starts at the first beat, so a job waiting in the queue is never hung).
Ctrl-C cancels the running job and forgets it, so a resume submits that cell again.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace

from ...device import is_cuda
from ...errors import StbenchError, require
from ...plan.launcher_config import Launch
from ...plan.planner import Plan
from ...plan.spec import RunSpec
from ...store.jobs import forget_job, read_jobs, record_job
from ...store.progress import read_beats
from .. import verdict
from ..processes import CellJob, Outcome, read_results
from ..watch import BEATS_S, Stall, Stalls
from . import torchrun

POLL_S = 1.0  # how often the parent looks for the job's result files (a stat, no Slurm call)
SACCT_EVERY_S = (
    15.0  # how often it asks sacct, for jobs that end without a result (killed, cancelled)
)
_RUNNING = (
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "COMPLETING",
    "CONFIGURING",
    "SUSPENDED",
    "RESIZING",
    "UNKNOWN",
    "",
)


def minutes(timeout: float) -> int:
    """Slurm's time limit is in minutes: the cell's --timeout rounded up."""
    return max(1, math.ceil(timeout / 60))


def job_options(spec: RunSpec, launch: Launch, timeout: float | None) -> dict[str, object]:
    """The sbatch options of a cell's job (underscored names), --slurm options last."""
    opts: dict[str, object] = {
        "job_name": f"stbench-{spec.run_id}",
        "nodes": spec.nodes,
        "ntasks_per_node": 1,
    }
    if timeout is not None:
        opts["time"] = minutes(timeout)
    if is_cuda(spec.device):
        opts["gpus_per_node"] = spec.nproc_per_node
    opts.update(launch.options)  # --slurm time=… or gpus_per_node=… win
    return opts


def submitit_parameters(opts: dict[str, object]) -> dict[str, object]:
    """The same options as submitit's AutoExecutor parameters."""
    from submitit.slurm.slurm import SlurmExecutor

    generic = {
        "job_name": "name",
        "nodes": "nodes",
        "ntasks_per_node": "tasks_per_node",
        "cpus_per_task": "cpus_per_task",
        "gpus_per_node": "gpus_per_node",
        "mem_gb": "mem_gb",
    }
    named = SlurmExecutor._valid_parameters()
    params: dict[str, object] = {}
    extra: dict[str, object] = {}
    for key, value in opts.items():
        if key == "time":  # minutes from --timeout, or Slurm's own format from --slurm time=
            params["timeout_min" if isinstance(value, int) else "slurm_time"] = value
        elif key in generic:
            params[generic[key]] = value
        elif key in named:
            params[f"slurm_{key}"] = value
        else:
            extra[key.replace("_", "-")] = value
    # One failing node ends the job; srun does not pass --cpus-per-task on by itself
    # (Slurm >= 22.05).
    srun = ["--kill-on-bad-exit=1"] + (
        [f"--cpus-per-task={opts['cpus_per_task']}"] if "cpus_per_task" in opts else []
    )
    params.update(slurm_srun_args=srun, slurm_additional_parameters=extra)
    return params


def run_node(script: str) -> int:
    """What each task of a cell's job runs on its node (pickled by submitit, called there)."""
    # submitit has Slurm send USR2 90 s before the time limit and then fails a job that cannot
    # checkpoint, early and as FAILED. A cell has no checkpoint: its limit is Slurm's own, which
    # ends the job as TIMEOUT. Ignored here, USR2 stays ignored in torchrun and the ranks too
    # (Slurm signals every process of the step, and USR2 would otherwise kill them).
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    code = subprocess.run(["bash", "-c", script]).returncode
    if code != 0:  # the job then ends FAILED, which sacct reports
        raise RuntimeError(
            f"torchrun on node {os.environ.get('SLURM_NODEID')} exited with code {code}"
        )
    return code


def check(plan: Plan) -> None:
    require("submitit", "--launcher slurm")
    if shutil.which("sbatch") is None or shutil.which("sacct") is None:
        raise StbenchError(
            "--launcher slurm needs Slurm's sbatch and sacct on the PATH; none found "
            "(inside an allocation, use --launcher srun)"
        )
    want = max(c.nodes for c in plan.cells)
    have = cluster_nodes(plan.launch.options.get("partition"))
    if have is not None and want > have:
        where = (
            f"partition {plan.launch.options['partition']}"
            if "partition" in plan.launch.options
            else "the cluster"
        )
        raise StbenchError(f"--nnodes {want} is more than the {have} node(s) of {where}")


def cluster_nodes(partition) -> int | None:
    cmd = ["sinfo", "-h", "-o", "%D"] + (["-p", str(partition)] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        return sum(int(n) for n in out.split()) or None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None  # no answer: Slurm will say so when the job is submitted


def _job(cell: CellJob):
    """Re-attach to the cell's recorded job, or submit it."""
    import submitit

    folder, run_id = cell.folder / "slurm" / "%j", cell.spec.run_id
    known = read_jobs(cell.folder).get(run_id)
    if known:
        return submitit.SlurmJob(
            folder=folder, job_id=known["job_id"], tasks=tuple(range(cell.spec.nodes))
        )
    cell.prepare()
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(
        **submitit_parameters(job_options(cell.spec, cell.launch, cell.timeout))
    )
    script = torchrun.slurm_node_script(
        cell.spec,
        sys.executable,
        torchrun.cell_args(cell.spec_path, cell.result_path, cell.child_args),
    )
    job = executor.submit(run_node, script)
    record_job(cell.folder, run_id, job.job_id, "slurm")
    return job


def _wait(job, stalls: Stalls) -> Stall | None:
    """Until the job ends (None), or its ranks' beats stop moving (the stall)."""
    asked = look_at = time.monotonic()
    while True:
        now = time.monotonic()
        force = now - asked > SACCT_EVERY_S
        if force:
            asked = now
        if job.done(force_check=force):
            return None
        if now >= look_at:
            look_at = now + BEATS_S
            stall = stalls.look(now)
            if not stalls.beats:  # queued, or starting: the stall clock starts at the first beat
                stalls.since, stall = now, None
            if stall is not None:
                return stall
        time.sleep(POLL_S)


def run_cell(cell: CellJob) -> Outcome:
    job = _job(cell)
    try:
        stall = _wait(job, Stalls(cell.work, cell.stall, cell.spec.world_size))
    except BaseException:  # Ctrl-C: cancel the job and forget it; a resume submits the cell again
        job.cancel(check=False)
        forget_job(cell.folder, cell.spec.run_id)
        raise
    if stall is None:
        return finished_row(cell, job.job_id)
    job.cancel(check=False)
    _, _, elapsed = sacct(job.job_id)  # until Slurm has ended it
    _gather_logs(cell, job.job_id)
    result = verdict.hung(cell.spec, stall.idle_s, stall.limit_s, cell.stall, stall.beats)
    return Outcome(
        replace(result, reason=f"slurm job {job.job_id} cancelled: {result.reason}"),
        cell_s=elapsed or 0.0,
        job_id=job.job_id,
    )


def sacct(job_id: str, wait_s: float = 30.0) -> tuple[str, str, float | None]:
    """(state, exit code, elapsed seconds) of a job, once Slurm's accounting has its end."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            out = subprocess.run(
                ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode,ElapsedRaw"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        state, code, elapsed = (
            (out.splitlines()[0].split("|") + ["", "", ""])[:3] if out.strip() else ("", "", "")
        )
        if state.split(" ")[0] not in _RUNNING or time.monotonic() > deadline:
            return state or "UNKNOWN", code, float(elapsed) if elapsed.isdigit() else None
        time.sleep(1.0)


def _gather_logs(cell: CellJob, job_id: str) -> None:
    """The tasks' stdout and stderr (submitit's files) as the cell's one log."""
    folder = cell.folder / "slurm" / job_id
    parts = []
    for path in sorted(folder.glob(f"{job_id}_*_log.*")):
        parts.append(f"==> {path.name} <==\n{path.read_text(errors='replace')}")
    cell.log.parent.mkdir(parents=True, exist_ok=True)
    cell.log.write_text("\n".join(parts))


def sacct_exit_code(text: str) -> int:
    """sacct's ExitCode `CODE:SIGNAL` as one number (a signal negative, as Popen has it)."""
    code, _, sig = (text or "0:0").partition(":")
    return -int(sig) if sig.isdigit() and int(sig) else int(code) if code.isdigit() else 1


def finished_row(cell: CellJob, job_id: str) -> Outcome:
    """The row of a finished job: rank 0's result when Slurm says it COMPLETED, else sacct's
    state and what failed first (verdict.py), rank 0's figures kept if it wrote them."""
    state, code, elapsed = sacct(job_id)
    _gather_logs(cell, job_id)
    log = cell.log.read_text(errors="replace")
    results, beats = read_results(cell.work), read_beats(cell.work)
    first = None if state == "COMPLETED" else (0, sacct_exit_code(code), "job")
    result = verdict.cell_outcome(cell.spec, first, log, results, beats)
    if first is not None:
        by_state = {"TIMEOUT": "timeout", "OUT_OF_MEMORY": "oom"}
        status = by_state.get(state.split(" ")[0], result.status)
        why = f"slurm job {job_id} {state} (exit code {code or '?'})"
        if status == "timeout" and cell.timeout is not None:
            why += (
                f": past its time limit of {minutes(cell.timeout)} min "
                f"(--timeout {cell.timeout:g} s)"
            )
        result = replace(result, status=status, reason=f"{why}; {result.reason}".rstrip("; "))
    return Outcome(result, cell_s=elapsed or 0.0, job_id=job_id)
