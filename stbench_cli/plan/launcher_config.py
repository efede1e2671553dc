"""How a study's cells are started: the launcher and its options. Pure: no torch, no I/O.

A study option, not an axis: every cell of a study runs through one launcher, recorded in the
manifest so that a resumed study starts its remaining cells the same way.

    local  this machine; `--nnodes N > 1` starts N torchrun agents over loopback
    slurm  one Slurm job per cell through submitit (`--slurm key=value` adds sbatch options)
    srun   inside an existing allocation (salloc, or an sbatch script): `srun` per cell
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import StbenchError

LAUNCHERS = ("local", "slurm", "srun")
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


@dataclass(frozen=True)
class Launch:
    """The launcher of a study and its Slurm options (sbatch option name -> value, sorted)."""

    kind: str = "local"
    slurm: tuple[tuple[str, object], ...] = ()

    @property
    def options(self) -> dict[str, object]:
        return dict(self.slurm)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "slurm": self.options}

    @classmethod
    def from_dict(cls, d: dict) -> Launch:
        """From a manifest (`to_dict`'s)."""
        return cls(d["kind"], tuple(sorted(d["slurm"].items())))


def parse_slurm(texts: list[str]) -> tuple[tuple[str, object], ...]:
    """`--slurm partition=gpu --slurm cpus_per_task=8` -> sorted (key, value) pairs, checked."""
    out: dict[str, object] = {}
    for text in texts:
        key, sep, value = (part.strip() for part in text.partition("="))
        key = key.replace("-", "_")
        if not sep or not value or not _KEY.match(key):
            raise StbenchError(
                f"--slurm {text!r} is malformed; expected key=value, e.g. partition=gpu"
            )
        if key in RESERVED:
            raise StbenchError(f"--slurm {key} is set by stbench ({RESERVED[key]}); leave it out")
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


def make_launch(kind: str | None, slurm: list[str], timeout: float | None) -> Launch:
    """The study's launcher from the command line; one clear line for anything wrong."""
    kind = kind or "local"
    if kind not in LAUNCHERS:
        raise StbenchError(f"--launcher {kind!r} is unknown; valid: {', '.join(LAUNCHERS)}")
    options = parse_slurm(slurm)
    if options and kind != "slurm":
        raise StbenchError(f"--slurm options apply to --launcher slurm, not --launcher {kind}")
    if kind == "slurm" and timeout is None and "time" not in dict(options):
        raise StbenchError(
            "--launcher slurm needs a time limit for its jobs: give --timeout SECONDS "
            "(or --slurm time=HH:MM:SS)"
        )
    return Launch(kind, options)
