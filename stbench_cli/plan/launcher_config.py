"""How a study's cells are started: the launcher and its options. Pure: no torch, no I/O.

A study option, not an axis: every cell of a study runs through one launcher, recorded in the
manifest so that a resumed study starts its remaining cells the same way.

    local   this machine; `--nnodes N > 1` starts N torchrun agents over loopback
    slurm   one Slurm job per cell through submitit (`--slurm key=value` adds sbatch options)
    srun    inside an existing allocation (salloc, or an sbatch script): `srun` per cell
    dask    one rank per worker of a Dask cluster (`--dask key=value`: where the cluster is,
            or which of Dask's own cluster classes to start: LocalCluster, dask-jobqueue's)
    mpirun  this machine's ranks started by Open MPI's mpirun (for backend=mpi4py)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import StbenchError

LAUNCHERS = ("local", "slurm", "srun", "dask", "mpirun")
# Launchers whose cells run on machines the parent does not sample: no peaks or GPUs of this
# machine apply to them (a Slurm job's nodes, a Dask cluster's workers).
ELSEWHERE = ("slurm", "dask")
# Set by stbench from the cell (nodes, one task per node) or from --timeout: never from --slurm.
RESERVED = {
    "nodes": "--nnodes",
    "ntasks": "--nnodes",
    "ntasks_per_node": "one task per node",
    "tasks_per_node": "one task per node",
    "job_name": "the cell's run_id",
    "output": "the study folder",
    "error": "the study folder",
    "array": "one job per cell",
    "wrap": "the cell's command",
}
TYPED = {
    "cpus_per_task": int,
    "gpus_per_node": int,
    "mem_gb": float,
}  # submitit's own typed parameters
_KEY = re.compile(r"^[a-z][a-z0-9_-]*$")
# --dask: where the cluster is (one of these, or none: Dask's own configuration, as
# `distributed.Client()` finds it), and the cluster classes stbench may start for the study
WHERE = ("scheduler", "scheduler_file", "cluster")
CLUSTERS = ("local", "slurm", "pbs", "lsf", "sge", "htcondor")
# the cluster classes' list-valued options: a repeated --dask key adds an item
LISTS = ("job_extra_directives", "job_script_prologue", "worker_extra_args", "job_directives_skip")
# set by stbench: a worker per rank of the study's largest world
DASK_RESERVED = {"n_workers": "one worker per rank", "processes": "one worker per job"}


@dataclass(frozen=True)
class Launch:
    """The launcher of a study, its Slurm options (sbatch option name -> value, sorted) and its
    Dask options (where the cluster is, or the cluster class and its options; sorted)."""

    kind: str = "local"
    slurm: tuple[tuple[str, object], ...] = ()
    dask: tuple[tuple[str, object], ...] = ()

    @property
    def options(self) -> dict[str, object]:
        return dict(self.slurm)

    @property
    def dask_options(self) -> dict[str, object]:
        return dict(self.dask)

    def to_dict(self) -> dict:
        out: dict = {"kind": self.kind, "slurm": self.options}
        if self.dask:  # only a Dask study has them: every other manifest reads as before
            out["dask"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.dask}
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Launch:
        """From a manifest (`to_dict`'s)."""
        dask = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("dask", {}).items()}
        return cls(d["kind"], tuple(sorted(d["slurm"].items())), tuple(sorted(dask.items())))


def _pairs(flag: str, texts: list[str], example: str, reserved: dict[str, str]):
    """Each `KEY=VALUE` of a repeated option as (key, value), a key's dashes as underscores;
    a malformed one, or a key stbench sets itself, is one line."""
    for text in texts:
        key, sep, value = (part.strip() for part in text.partition("="))
        key = key.replace("-", "_")
        if not sep or not value or not _KEY.match(key):
            raise StbenchError(f"{flag} {text!r} is malformed; expected key=value, e.g. {example}")
        if key in reserved:
            raise StbenchError(f"{flag} {key} is set by stbench ({reserved[key]}); leave it out")
        yield key, value


def parse_slurm(texts: list[str]) -> tuple[tuple[str, object], ...]:
    """`--slurm partition=gpu --slurm cpus_per_task=8` -> sorted (key, value) pairs, checked."""
    out: dict[str, object] = {}
    for key, value in _pairs("--slurm", texts, "partition=gpu", RESERVED):
        if key in TYPED:
            try:
                out[key] = TYPED[key](value)
            except ValueError:
                raise StbenchError(
                    f"--slurm {key}={value!r} is not a valid {TYPED[key].__name__}"
                ) from None
        else:
            out[key] = value
    return tuple(sorted(out.items()))


def _dask_value(text: str) -> object:
    """A --dask value as the cluster classes take it: a whole number as int, else the text."""
    return int(text) if text.isdigit() else text


def parse_dask(texts: list[str]) -> tuple[tuple[str, object], ...]:
    """`--dask scheduler=tcp://host:8786`, `--dask cluster=slurm --dask cores=4 …` -> sorted
    (key, value) pairs, checked: at most one of WHERE, a cluster's options only with a cluster."""
    out: dict[str, object] = {}
    for key, value in _pairs("--dask", texts, "scheduler=tcp://host:8786", DASK_RESERVED):
        if key in LISTS:
            out[key] = (*out.get(key, ()), value)
        else:
            out[key] = _dask_value(value)
    where = [k for k in WHERE if k in out]
    if len(where) > 1:
        raise StbenchError(f"--dask: give one of {', '.join(WHERE)}, not {' and '.join(where)}")
    if "cluster" in out and out["cluster"] not in CLUSTERS:
        raise StbenchError(
            f"--dask cluster={out['cluster']!r} is unknown; valid: {', '.join(CLUSTERS)}"
        )
    extra = sorted(set(out) - set(WHERE))
    if extra and "cluster" not in out:
        raise StbenchError(
            f"--dask {extra[0]}=... is an option of a cluster stbench starts: add "
            f"--dask cluster={'|'.join(CLUSTERS)}"
        )
    return tuple(sorted(out.items()))


def make_launch(
    kind: str | None, slurm: list[str], timeout: float | None, dask: list[str] | None = None
) -> Launch:
    """The study's launcher from the command line; one clear line for anything wrong."""
    kind = kind or "local"
    if kind not in LAUNCHERS:
        raise StbenchError(f"--launcher {kind!r} is unknown; valid: {', '.join(LAUNCHERS)}")
    options = parse_slurm(slurm)
    if options and kind != "slurm":
        raise StbenchError(f"--slurm options apply to --launcher slurm, not --launcher {kind}")
    dask_options = parse_dask(list(dask or ()))
    if dask_options and kind != "dask":
        raise StbenchError(f"--dask options apply to --launcher dask, not --launcher {kind}")
    if kind == "slurm" and timeout is None and "time" not in dict(options):
        raise StbenchError(
            "--launcher slurm needs a time limit for its jobs: give --timeout SECONDS "
            "(or --slurm time=HH:MM:SS)"
        )
    return Launch(kind, options, dask_options)
