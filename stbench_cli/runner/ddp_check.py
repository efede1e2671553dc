"""The doctor's 2-rank DDP cell: a real cnn-strain cell through the runner's own launch path,
whose sync_s is then held against DDP's own measurement of exposed communication. On CUDA the
world is NCCL across two GPUs, or two gloo ranks sharing the one GPU a machine has."""

from __future__ import annotations

from pathlib import Path

from ..device import parse
from ..plan.planner import preset_params
from ..plan.spec import RunSpec, identify
from ..store.machine import EnvInfo
from . import launchers
from .processes import CellJob


def ddp_figures(device: str, env: EnvInfo, folder: Path):
    """Figures of a 2-rank world: gloo on CPU; on CUDA NCCL across two GPUs, or gloo on one."""
    backend = parse(device).backend if env.gpu_count >= 2 else "gloo"
    # DDP's logger sampling every step: its figure then covers the same steps as sync_s
    params, _ = preset_params(
        "cnn-strain", "smoke", n_samples=4096, warmup_steps=2, backend=backend, ddp_log_every=1
    )
    spec = identify(
        RunSpec(
            "cnn-strain",
            parse(device).kind,
            "ddp",
            64,
            1,
            world_size=2,
            params=tuple(sorted(params.items())),
        )
    )
    outcome = launchers.get("local").run_cell(CellJob(spec, folder, timeout=600))
    r = outcome.result
    steps = sum(e.steps for e in r.epochs)
    return {
        "status": r.status,
        "reason": r.reason,
        "steps": steps,
        "sync_s": r.figures.sync_s,
        "ddp_exposed_comm_s": r.figures.ddp_exposed_comm_s,
        "ddp_comm_s": r.figures.ddp_comm_s,
        "backend": backend,
    }
