"""Run a list of cells into a result folder, resumably.

A cell is done when its row is in runs.csv; `run_matrix` skips those, so running it again
on the same folder (after Ctrl-C, a crash or SIGKILL of this process) completes the matrix
with exactly one row per cell x repeat.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

from . import results
from .envinfo import EnvInfo
from .launch import Outcome, run_cell
from .spec import RunSpec, skip_reason


def identity(spec: RunSpec, env: EnvInfo) -> dict:
    """The columns that say what ran where."""
    return {
        "schema": results.SCHEMA, "run_id": spec.run_id, "workload": spec.workload, "device": spec.device,
        "strategy": spec.strategy, "world_size": spec.world_size, "nodes": 1, "batch_size": spec.batch_size,
        "global_batch_size": spec.batch_size * spec.world_size, "epochs": spec.epochs, "repeat": spec.repeat,
        "seed": spec.seed, "preset": spec.preset, "params": json.dumps(spec.param_dict, sort_keys=True),
        "host": env.host, "cpu_model": env.cpu_model, "gpu_count": env.gpu_count, "torch": env.torch,
        "cuda": env.cuda, "nccl": env.nccl,
    }


def make_row(spec: RunSpec, env: EnvInfo, outcome: Outcome, peaks: dict[str, dict]) -> dict:
    row = identity(spec, env)
    row.update(outcome.summary)
    row.update(outcome.energy)
    row.update(status=outcome.status, reason=outcome.reason)
    if "wall_s" in outcome.summary:
        row["setup_s"] = max(outcome.cell_s - outcome.summary["wall_s"], 0.0)
    peak = peaks.get(spec.device)
    if peak and outcome.summary.get("achieved_gflops") is not None:
        # A ddp world on N GPUs has N devices' peak; on CPU the ranks share one machine.
        devices = spec.world_size if spec.device.startswith("cuda") else 1
        row["peak_gflops"] = peak["matmul_gflops"] * devices
        row["peak_fraction"] = outcome.summary["achieved_gflops"] / row["peak_gflops"]
    return row


def cell_skip(spec: RunSpec, env: EnvInfo, workload) -> str | None:
    """Why a cell cannot run here: the machine (devices, strategy), then the workload's own
    judgement (a parameter combination that does not exist, memory it predicts will not fit)."""
    reason = skip_reason(spec, env.gpu_count, workload.strategies)
    if reason or workload.skipper is None:
        return reason
    gpu_mb = None
    if spec.device.startswith("cuda") and env.gpus:
        index = int(spec.device.split(":")[1]) if ":" in spec.device else 0
        gpu_mb = env.gpus[min(index, len(env.gpus) - 1)].get("memory_mb")
    memory = {"host_bytes": env.ram_gb * 2**30, "device_bytes": gpu_mb * 2**20 if gpu_mb else None}
    try:
        return workload.skip(spec.param_dict, spec.batch_size, spec.device, memory)
    except ValueError:  # unusable data: the up-front data check reports it in one line
        return None


def skipped_row(spec: RunSpec, env: EnvInfo, reason: str) -> dict:
    return {**identity(spec, env), "status": "skipped", "reason": reason}


def run_matrix(
    cells: list[RunSpec], folder: Path, env: EnvInfo, workload, *,
    timeout: float | None = None, peaks: dict[str, dict] | None = None, interval: float = 1.0,
    extra_args: tuple[str, ...] = (),
    on_start: Callable[[RunSpec], None] = lambda spec: None,
    on_done: Callable[[RunSpec, dict], None] = lambda spec, row: None,
) -> list[dict]:
    """Run every cell not yet in folder/runs.csv; returns the rows written now."""
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    results.prune_orphans(folder)
    done = results.done_ids(folder)
    written = []
    for spec in cells:
        if spec.run_id in done:
            continue
        on_start(spec)
        reason = cell_skip(spec, env, workload)
        if reason:
            row, epochs, system = skipped_row(spec, env, reason), [], []
        else:
            work = folder / ".cells" / spec.run_id
            outcome = run_cell(spec, work, folder / "logs" / f"{spec.run_id}.log", timeout, interval, extra_args)
            row = make_row(spec, env, outcome, peaks or {})
            epochs = [{"run_id": spec.run_id, **e} for e in outcome.epochs]
            system = [{"run_id": spec.run_id, **s} for s in outcome.system]
            shutil.rmtree(work, ignore_errors=True)
        results.write_cell(folder, row, epochs, system)
        done.add(spec.run_id)
        written.append(row)
        on_done(spec, row)
    shutil.rmtree(folder / ".cells", ignore_errors=True)
    return written
