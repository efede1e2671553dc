"""The measurements behind `stbench doctor`, in a child process (torch):

    python -m stbench.child.checks phase-timing|overhead|gpu-load DEVICE   -> JSON on stdout

phase-timing  a short run of a real workload (cnn-strain) with a synchronized wall clock read
              after every step: the phases of the steps must add up to the wall time between
              the first and the last step's end
overhead      the trainer's instrumented step against a bare step on the same batch, in the
              same process, blocks alternating (also `benchmarks/overhead.py`)
gpu-load      a matmul loop for a few seconds, for the sampler's energy check
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import time

import torch

from ..contract import BuildContext
from ..device import Accelerator, Clock
from ..plan.planner import preset_params
from ..plan.registry import get
from ..plan.spec import RunSpec
from .timing import resolve_marks
from .trainer import LoopConfig, Trainer


def make_trainer(
    device: str,
    workload: str = "cnn-strain",
    preset: str = "smoke",
    samples: int = 4096,
    clock: Clock | None = None,
) -> Trainer:
    """A trainer of a workload's preset on `device`, outside any study (warm-up 0)."""
    w = get(workload)
    params, engine = preset_params(workload, preset, warmup_steps=0)
    batch = engine.get("batch_size", 64)
    if "n_samples" in params:
        params["n_samples"] = max(samples, 4 * batch)
    spec = RunSpec(workload, device, "single", batch, 1, params=tuple(sorted(params.items())))
    accel = Accelerator(device)
    accel.select()
    trainer = Trainer(
        w.build(params, BuildContext(device=str(accel.device))), LoopConfig.from_spec(spec), accel
    )
    if clock is not None:
        trainer.clock = trainer.probe.clock = clock
    return trainer


def phase_timing(device: str, steps: int = 40, clock: Clock | None = None) -> dict:
    """Phases of steps 2..N (device clock) against the synchronized wall clock from the end
    of step 1 to the end of step N."""
    trainer = make_trainer(device, clock=clock)
    sync = trainer.accel.synchronize
    ends: list[float] = []
    trainer.step_hook = lambda step: (sync(), ends.append(time.perf_counter()))
    trainer.sampler.set_epoch(0)
    it, loss_sum = itertools.cycle(trainer.train_loader), torch.zeros((), device=trainer.device)
    marks, start = [], trainer.clock.mark()
    for _ in range(steps):
        marks.append(trainer._step(it, start, loss_sum))
        start = marks[-1].end
    times = resolve_marks(trainer.clock, marks)
    # the hook runs inside a step, so step k's wall time ends at the hook of step k
    return {
        "steps": steps - 1,
        "phases_s": times.step_seconds(skip=1),
        "wall_s": ends[-1] - ends[0],
    }


def overhead(
    device: str,
    steps: int = 50,
    blocks: int = 6,
    workload: str = "cnn-strain",
    preset: str = "smoke",
) -> dict:
    """Seconds per step: a bare step and the trainer's instrumented step on the same batch.
    Blocks alternate (ABBA) so drift of the machine falls on both equally."""
    trainer = make_trainer(device, workload, preset)
    bare, instrumented = _step_kinds(trainer)
    sync = trainer.accel.synchronize

    def per_step(fn) -> float:
        sync()
        t = time.perf_counter()
        fn(steps)
        sync()
        return (time.perf_counter() - t) / steps

    bare(10), instrumented(10)  # warm-up
    bares, timed, diffs = [], [], []
    for block in range(blocks):
        first, second = (instrumented, bare) if block % 2 else (bare, instrumented)
        a, b = per_step(first), per_step(second)
        i, s = (a, b) if first is instrumented else (b, a)
        bares.append(s)
        timed.append(i)
        diffs.append(i - s)
    # the fastest block of each kind is the least disturbed by whatever else the machine runs
    return {
        "bare_step_s": statistics.median(bares),
        "overhead_s": statistics.median(diffs),
        "min_bare_step_s": min(bares),
        "min_overhead_s": min(timed) - min(bares),
        "spread_s": [min(diffs), max(diffs)],
        "steps": steps,
        "blocks": blocks,
        "threads": torch.get_num_threads(),
    }


def _step_kinds(trainer):
    """(bare, instrumented): n steps on one batch already on the device, of the trainer's model
    and optimizer alone, and of the trainer's own instrumented step."""
    x, y = trainer.transfer(*next(iter(trainer.train_loader)), trainer.device)
    model, opt, sched = trainer.model, trainer.optimizer, trainer.schedule
    loss = trainer.task.model.loss

    def bare(n: int) -> None:
        for _ in range(n):
            opt.zero_grad(set_to_none=True)
            loss(model, x, y, 0).backward()
            opt.step()
            sched.step()

    def instrumented(n: int) -> None:
        it, total = itertools.repeat((x, y)), torch.zeros((), device=trainer.device)
        marks, start = [], trainer.clock.mark()
        for _ in range(n):
            marks.append(trainer._step(it, start, total))
            start = marks[-1].end
        resolve_marks(trainer.clock, marks)  # the per-epoch read-out belongs to the cost too

    trainer.transfer = lambda a, b, d: (a, b)  # the batch is already on the device
    return bare, instrumented


def gpu_load(device: str, seconds: float = 6.0) -> dict:
    """Keep the GPU busy with fp32 matmuls for `seconds` (what the energy counter is checked on)."""
    accel = Accelerator(device)
    accel.select()
    a = torch.randn(4096, 4096, device=accel.torch)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        a = (a @ a).clamp_(-1, 1)
        n += 1
        if n % 20 == 0:
            accel.synchronize()
    accel.synchronize()
    return {"seconds": time.perf_counter() - t0, "matmuls": n}


def launches(device: str, ops: int = 2000) -> dict:
    """What one operator costs when it does next to nothing (an in-place add on a 1-element
    tensor): on the host in eager PyTorch (the dispatcher, autograd's check, the launch), and on
    a GPU each kernel's own cost replayed in a CUDA graph: the floors a predicted step's
    launches are counted at (plan/predict.py)."""
    accel = Accelerator(device)
    accel.select()
    x = torch.zeros(1, device=accel.torch)

    def work():
        for _ in range(ops):
            x.add_(1)

    work()  # first-use paths
    accel.synchronize()
    t0 = time.perf_counter()
    work()
    issued = time.perf_counter() - t0  # the host's: a GPU runs the kernels behind it
    accel.synchronize()
    total = time.perf_counter() - t0
    graph = accel.graph_replay_s(work)
    return {
        "ops": ops,
        "eager_op_us": issued / ops * 1e6,
        "op_us": total / ops * 1e6,
        "graph_kernel_us": None if graph is None else graph / ops * 1e6,
    }


CHECKS = {
    "phase-timing": phase_timing,
    "overhead": overhead,
    "gpu-load": gpu_load,
    "launches": launches,
}

if __name__ == "__main__":
    print(json.dumps(CHECKS[sys.argv[1]](sys.argv[2])))
