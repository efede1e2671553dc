"""jobs.json: the Slurm job (or job.step) of each cell of a study, recorded as soon as it exists.

A parent killed while a cell's job runs leaves the job's id here; the resumed study re-attaches to
that job (running or finished) instead of submitting the cell again. Written atomically.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from ..errors import StbenchError
from .files import atomic_write

NAME = "jobs.json"


def read_jobs(folder: Path) -> dict[str, dict]:
    """run_id -> {"job_id", "launcher", "submitted"}; empty for a study without jobs."""
    path = folder / NAME
    if not path.exists():
        return {}
    try:
        jobs = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StbenchError(
            f"{path} is corrupt ({exc}); it must be the JSON stbench wrote"
        ) from None
    return jobs if isinstance(jobs, dict) else {}


def record_job(folder: Path, run_id: str, job_id: str, launcher: str) -> None:
    jobs = read_jobs(folder)
    jobs[run_id] = {
        "job_id": str(job_id),
        "launcher": launcher,
        "submitted": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write(folder / NAME, json.dumps(jobs, indent=1))


def forget_job(folder: Path, run_id: str) -> None:
    """The job was cancelled on purpose (Ctrl-C): a resume submits the cell again."""
    jobs = read_jobs(folder)
    if jobs.pop(run_id, None) is not None:
        atomic_write(folder / NAME, json.dumps(jobs, indent=1))
