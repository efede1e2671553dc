"""A cell's process: run one cell and write its `CellResult` as JSON.

    python -m stbench.child.cell SPEC.json RESULT.json [--profile DIR]   (single process)
    torchrun --standalone --nproc-per-node N -m stbench.child.cell SPEC.json RESULT.json
    torchrun --nnodes M --node-rank I --rdzv-backend static --master-addr H …
        -m stbench.child.cell …

    options: --profile DIR    the step profiler's trace into DIR
             --progress       heartbeats beside RESULT.json for the parent's stall watchdog
             --pg-timeout S   every process group's timeout (default: store/progress.py's)

Rank 0 writes RESULT.json. A rank that fails writes RESULT.rankR.json with its status and
last error line, then exits non-zero so that torchrun tears the rest of the world down.

Leaving: a rank that ended well has no collective of its own pending (the stop vote read), destroys
every process group, writes its result, and ends its process with os._exit, without the
interpreter's finalization. A process group's native threads outlive destroy_process_group (a DDP
model leaves Python references to its group, so gloo's worker and socket threads, and kineto's
config thread once the profiler ran, stay alive until the process ends); one that completes a
collective or frees a tensor while the interpreter finalizes needs the GIL, is made to exit, and
aborts the rank: `terminate called without an active exception`, SIGABRT. Ended without
finalization, no thread of torch runs after this process's last line.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import os
import resource
import sys
import traceback
from dataclasses import replace
from pathlib import Path

from ..contract import BuildContext
from ..device import Accelerator
from ..plan.spec import RunSpec
from ..store.cell_result import CellResult
from ..store.progress import LAUNCHED_ENV, pg_timeout
from . import allocator, cpu
from .heartbeat import Heartbeat

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
    predicted = workload.predict(
        spec.param_dict, spec.batch_size, spec.device, capability=accel.capability()
    )
    if not predicted:
        return None
    return accel.peak_of(predicted["device_bytes"], predicted["host_bytes"]) / 2**20


def open_device(
    spec: RunSpec, timeout_s: float | None = None
) -> tuple[Accelerator, tuple[int, int, int]]:
    """This process's device, selected before anything touches it (NCCL and the caching
    allocator bind to the current device), then the torchrun world joined."""
    from . import ddp

    rank, local_rank, world = ddp.world_from_env()
    accel = Accelerator.for_rank(spec.device, local_rank)
    accel.select()
    ddp.join(accel, spec.backend, world, timeout_s)
    return accel, (rank, local_rank, world)


def train_cell(
    spec: RunSpec,
    profile_dir: Path | None = None,
    progress: Heartbeat | None = None,
    pg_timeout_s: float | None = None,
) -> CellResult:
    """Train one cell; with `profile_dir`, under the step profiler (a profiler that cannot
    start is named in the result's `unavailable`, and the cell runs unprofiled). `progress`:
    this rank's heartbeat; `pg_timeout_s`: the process groups' timeout."""
    import torch

    from ..plan import registry
    from .trainer import LoopConfig, Trainer

    progress = progress if progress is not None else Heartbeat()
    workload = registry.get(spec.workload)
    cfg = replace(LoopConfig.from_spec(spec, workload.target_ratio), pg_timeout_s=pg_timeout_s)
    chosen = cpu.apply(cfg.knobs)  # threads, inter-op threads, binding
    # before the workload allocates: the heap it builds is the one the steps reuse (allocator.py)
    kept = allocator.keep_freed_memory() if cfg.knobs.allocator == "keep" else None
    ran, why = cpu.allocator_ran(cfg.knobs.allocator, kept)
    progress.phase("joining the world (rendezvous, init_process_group)")
    accel, (rank, _, world) = open_device(spec, pg_timeout_s)
    profiler, unavailable = _profiler(spec, profile_dir, accel) if profile_dir else (None, {})
    unavailable.update({"allocator": why} if why else {})
    torch.manual_seed(spec.seed)
    base_rss = _rss_mb()  # interpreter + torch, before the workload allocates anything
    progress.phase("building the workload's task (its data and model)")
    task = workload.build(spec.param_dict, BuildContext(spec.seed, rank, world, str(accel.device)))
    hook = profiler.hook if profiler else None
    result = Trainer(task, cfg, accel, rank, world, step_hook=hook, progress=progress).run()
    peak_gpu = result.figures.peak_gpu_mb
    if profiler:
        profiler.finish()
        peak_gpu = profiler.peak_mb(peak_gpu)  # it resets the allocator's peak every step
    progress.phase("the cell's last figures (an all-reduce, an all-gather)")
    figures = replace(
        result.figures,
        peak_gpu_mb=peak_gpu,
        base_rss_mb=base_rss,
        **_process_figures(task, workload, spec, accel),
        **chosen,
        host_allocator=ran,
    )
    return replace(result, figures=figures, unavailable={**result.unavailable, **unavailable})


def _process_figures(task, workload, spec: RunSpec, accel: Accelerator) -> dict:
    """What the cell's process adds to the trainer's figures once training is done: its peak
    RSS (the max over ranks: an all-reduce), the data, every node's host (an all-gather), its
    threads, the workload's memory prediction, the device's name, what reading the data cost."""
    import torch

    from . import ddp

    rss = ddp.reduce([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0], accel.torch)[0]
    return dict(
        peak_rss_mb=rss,
        data_mb=task.data.mb,
        data_source=task.data.source,
        node_hosts=ddp.node_hosts(),
        threads=torch.get_num_threads(),
        predicted_mb=_predicted_mb(workload, spec, accel),
        device_name=accel.name(),
        **(task.data.read().figures() if task.data.read else {}),
    )


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


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m stbench.child.cell")
    parser.add_argument("spec", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--pg-timeout", type=float, default=pg_timeout(None))
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    faulthandler.enable(all_threads=True)  # a rank killed by a fatal signal: every thread's stack
    args = _args(argv)
    spec = RunSpec.from_json(args.spec.read_text())
    rank, node = int(os.environ.get("RANK", "0")), int(os.environ.get("GROUP_RANK", "0"))
    beat = Heartbeat(args.result.parent if args.progress else None, rank, node)
    try:
        result = train_cell(spec, args.profile, beat, args.pg_timeout)
        _leave_world(beat)
    except BaseException as exc:  # the parent turns this into a status row; the matrix goes on
        traceback.print_exc()
        own = args.result.with_name(f"{args.result.stem}.rank{rank}.json")
        target = args.result if rank == 0 else own
        write_result(target, CellResult(classify(exc), last_line(exc)))
        beat.close(f"failed: {last_line(exc)}", done=False)
        return 1
    beat.close()
    if rank == 0:
        write_result(args.result, result)
        print(beat.timeline(_launched()), file=sys.stderr)
    return 0


def _launched() -> float:
    """When the parent launched this cell (its timeline's zero), else when the process began."""
    try:
        return float(os.environ[LAUNCHED_ENV])
    except (KeyError, ValueError):
        import psutil

        return psutil.Process().create_time()


def _leave_world(progress: Heartbeat) -> None:
    """Destroy every process group after a cell that ended, none of their work pending (the
    trainer, DDP's reducer and the vote's group collected first: NCCL frees its communicators
    here). A failed rank does not come here: it waits for no one, and torchrun tears its world
    down."""
    import torch.distributed as dist

    from . import ddp

    progress.phase("leaving the world (destroy_process_group)")
    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    ddp.finalize_mpi()  # backend=mpi4py: mpirun fails a job whose process skipped it
    gc.collect()


def leave(code: int) -> None:
    """End this process without the interpreter's finalization (see the module's docstring):
    every file it wrote is closed, its output flushed here."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main(sys.argv[1:]))
