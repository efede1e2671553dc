"""A cell's process: run one cell and write its `CellResult` as JSON.

    python -m stbench.child.cell SPEC.json RESULT.json [--profile DIR]            (single process)
    torchrun --standalone --nproc-per-node N -m stbench.child.cell SPEC.json RESULT.json
    torchrun --nnodes M --node-rank I --rdzv-backend static --master-addr H … -m stbench.child.cell …

Rank 0 writes RESULT.json. A rank that fails writes RESULT.rankR.json with its status and
last error line, then exits non-zero so that torchrun tears the rest of the world down.
"""

from __future__ import annotations

import os
import resource
import sys
import traceback
from dataclasses import replace
from pathlib import Path

from ..contract import BuildContext
from ..device import Accelerator, device_count, is_cuda, resolve
from ..plan.spec import RunSpec
from ..store.rows import CellResult
from . import allocator, cpu

_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def classify(exc: BaseException) -> str:
    """oom for any allocator failure (CUDA, CPU), failed otherwise."""
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return "oom"
    return "oom" if any(m in str(exc).lower() for m in _OOM_MARKERS) else "failed"


def last_line(exc: BaseException) -> str:
    """The exception as one line (a message that spans lines, e.g. with a module's repr, is
    joined), for the row's reason."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}"[:400] if message else type(exc).__name__


def write_result(path: Path, result: CellResult) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(result.to_json())
    os.replace(tmp, path)


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _predicted_mb(workload, spec: RunSpec, accel: Accelerator) -> float | None:
    """The workload's prediction for the GPU this cell ran on (its capability sizes cuBLAS's
    workspaces), to set beside the measured peak."""
    if not workload.predict:
        return None
    predicted = workload.predict(spec.param_dict, spec.batch_size, spec.device, capability=accel.capability())
    if not predicted:
        return None
    # On CPU the device is the host: everything counts against one peak.
    return (predicted["device_bytes"] + (0 if accel.is_cuda else predicted["host_bytes"])) / 2**20


def open_device(spec: RunSpec) -> tuple[Accelerator, tuple[int, int, int]]:
    """This process's device, selected before anything touches it (NCCL and the caching
    allocator bind to the current device), then the torchrun world joined."""
    from . import ddp

    rank, local_rank, world = ddp.world_from_env()
    count = device_count() if is_cuda(spec.device) else 1
    accel = Accelerator(resolve(spec.device, local_rank, count))
    accel.select()
    ddp.join(accel, spec.backend, world)
    return accel, (rank, local_rank, world)


def run(spec: RunSpec, profile_dir: Path | None = None) -> CellResult:
    """Train one cell; with `profile_dir`, under the step profiler (a profiler that cannot
    start is named in the result's `unavailable`, and the cell runs unprofiled)."""
    import torch

    from ..plan import registry
    from . import ddp
    from .trainer import LoopConfig, Trainer

    workload = registry.get(spec.workload)
    cfg = LoopConfig.from_spec(spec, workload.target_ratio)
    chosen = cpu.apply(cfg.knobs)  # threads, inter-op threads, binding (issue 32)
    # before the workload allocates: the heap it builds is the one the steps reuse (allocator.py)
    kept = allocator.keep_freed_memory() if cfg.knobs.allocator == "keep" else None
    ran, why = cpu.allocator_ran(cfg.knobs.allocator, kept)
    accel, (rank, _, world) = open_device(spec)
    profiler, unavailable = _profiler(spec, profile_dir, accel) if profile_dir else (None, {})
    unavailable.update({"allocator": why} if why else {})
    torch.manual_seed(spec.seed)
    base_rss = _rss_mb()  # interpreter + torch, before the workload allocates anything
    task = workload.build(spec.param_dict, BuildContext(spec.seed, rank, world, str(accel.device)))
    result = Trainer(task, cfg, accel, rank, world, step_hook=profiler.hook if profiler else None).run()
    peak_gpu = result.figures.peak_gpu_mb
    if profiler:
        profiler.finish()
        peak_gpu = profiler.peak_mb(peak_gpu)  # it resets the allocator's peak every step
    rss = ddp.reduce([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0], accel.torch)[0]
    figures = replace(
        result.figures, peak_gpu_mb=peak_gpu, peak_rss_mb=rss, base_rss_mb=base_rss, data_mb=task.data.mb, data_source=task.data.source,
        node_hosts=ddp.node_hosts(), threads=torch.get_num_threads(),
        predicted_mb=_predicted_mb(workload, spec, accel), device_name=accel.name(),
        **(task.data.read().figures() if task.data.read else {}), **chosen, host_allocator=ran,
    )
    return replace(result, figures=figures, unavailable={**result.unavailable, **unavailable})


def _profiler(spec: RunSpec, folder: Path, accel: Accelerator):
    """`--profile DIR`: record the steady steps of this short run into DIR/<run_id>."""
    from .profiling import StepProfiler

    p = spec.param_dict
    warmup = p.get("warmup_steps", 0)
    active = max((p.get("max_steps") or warmup + 10) - warmup, 1)
    try:
        return StepProfiler(folder / spec.run_id, accel, warmup, active), {}
    except Exception as exc:  # a measurement that fails never stops the study
        return None, {"profiler": last_line(exc)}


def main(argv: list[str]) -> int:
    spec = RunSpec.from_json(Path(argv[0]).read_text())
    result_path = Path(argv[1])
    rank = int(os.environ.get("RANK", "0"))
    try:
        result = run(spec, Path(argv[3]) if argv[2:3] == ["--profile"] else None)
        _leave_world()
    except BaseException as exc:  # the parent turns this into a status row; the matrix goes on
        traceback.print_exc()
        target = result_path if rank == 0 else result_path.with_name(f"{result_path.stem}.rank{rank}.json")
        write_result(target, CellResult(classify(exc), last_line(exc)))
        return 1
    if rank == 0:
        write_result(result_path, result)
    return 0


def _leave_world() -> None:
    """Destroy the process group after a cell that ended (NCCL warns about one left open; a
    failed rank does not wait for the others here: torchrun tears its world down)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
