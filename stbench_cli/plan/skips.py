"""Why a cell cannot run here: the machine first (devices, strategy), then the workload's
own judgement (a parameter combination that does not exist, memory it predicts will not fit).
Decided once per cell, when the study is planned. Pure: no torch."""

from __future__ import annotations

from ..contract import Workload
from ..store.machine import EnvInfo
from .spec import DISTRIBUTED, RunSpec


def skip_reason(run: RunSpec, gpu_count: int, strategies: tuple[str, ...]) -> str | None:
    """Why this cell cannot run on this machine, or None if it can."""
    if run.strategy not in strategies:
        return f"strategy {run.strategy} is not supported by {run.workload} (supported: {', '.join(strategies)})"
    if run.device.startswith("cuda"):
        if gpu_count == 0:
            return f"{run.device} requested, but no GPU is visible (torch.cuda.is_available() is False)"
        if ":" in run.device:
            index = int(run.device.split(":")[1])
            if run.strategy in DISTRIBUTED:
                return f"{run.strategy} on cuda puts one rank on each GPU: use --device cuda, not a numbered device"
            if index >= gpu_count:
                return f"{run.device} requested, but only {gpu_count} GPU(s) are visible (cuda:0..cuda:{gpu_count - 1})"
        if run.strategy in DISTRIBUTED and run.world_size > gpu_count:
            return f"{run.strategy} with nproc={run.world_size} on cuda needs {run.world_size} GPUs, {gpu_count} visible"
    return None


def cell_skip(spec: RunSpec, env: EnvInfo, workload: Workload) -> str | None:
    reason = skip_reason(spec, env.gpu_count, workload.strategies)
    if reason or workload.skip is None:
        return reason
    memory = {"host_bytes": env.ram_gb * 2**30, "device_bytes": env.gpu_memory_bytes(spec.device)}
    try:
        return workload.skip(spec.param_dict, spec.batch_size, spec.device, memory)
    except ValueError:  # unusable data: the up-front data check reports it in one line
        return None
