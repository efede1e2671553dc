"""Instrumentation overhead: the trainer's timed step against a bare step, same batch,
same process, same model and optimizer.

    python benchmarks/overhead.py [--workload cnn-strain] [--preset default] [--steps 200] [--blocks 10]

Blocks of bare and instrumented steps alternate (ABAB...) so that drift of the machine
falls on both equally; the overhead is the median over blocks of the per-step difference.
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch

from stbench.child.timing import StepMarks, resolve
from stbench.child.trainer import LoopConfig, Trainer
from stbench.contract import BuildContext
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec


def marks_cost(clock, n: int) -> float:
    """Seconds per step spent taking a step's five marks, recording them and resolving them."""
    t = time.perf_counter()
    marks = [StepMarks(clock.mark(), clock.mark(), clock.mark(), clock.mark(), clock.mark()) for _ in range(n)]
    resolve(clock, marks)
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="cnn-strain")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    w = get(args.workload)
    params = {name: p.default for name, p in w.all_params.items()}
    preset = dict(w.presets[args.preset])
    batch = preset.pop("batch_size", 64)
    preset.pop("epochs", None)
    params.update(preset, n_samples=max(4 * batch, 1024))  # one batch is all the loop needs
    spec = RunSpec(args.workload, args.device, "single", batch, 1, params=tuple(sorted(params.items())))
    device = torch.device(args.device)
    trainer = Trainer(w.build(params, BuildContext(device=args.device)), LoopConfig.from_spec(spec), device)
    x, y = [t.to(device) for t in next(iter(trainer.train_loader))]
    model, opt, sched, loss = trainer.model, trainer.optimizer, trainer.schedule, trainer.task.model.loss
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def bare(n: int) -> None:
        for _ in range(n):
            opt.zero_grad(set_to_none=True)
            loss(model, x, y, 0).backward()
            opt.step()
            sched.step()

    def instrumented(n: int) -> None:
        marks, total = [], torch.zeros((), device=device)
        it = itertools.repeat((x, y))
        for _ in range(n):
            m, loss = trainer._step(it)
            marks.append(m)
            total += loss
        resolve(trainer.clock, marks)  # the per-epoch read-out belongs to the cost too

    def per_step(fn) -> float:
        sync()
        t = time.perf_counter()
        fn(args.steps)
        sync()
        return (time.perf_counter() - t) / args.steps

    bare(20), instrumented(20)  # warm-up
    diffs, bares = [], []
    for block in range(args.blocks):
        # ABBA order: whichever runs second in a block gets warmer caches; alternate it.
        if block % 2:
            i, b = per_step(instrumented), per_step(bare)
        else:
            b, i = per_step(bare), per_step(instrumented)
        bares.append(b)
        diffs.append(i - b)
    step = statistics.median(bares)
    over = statistics.median(diffs)
    direct = marks_cost(trainer.clock, 10_000)
    print(f"{args.workload} preset={args.preset} batch={batch} device={args.device} threads={torch.get_num_threads()}")
    print(f"bare step: {step * 1e3:.3f} ms (median of {args.blocks} blocks x {args.steps} steps)")
    print(f"instrumentation: {over * 1e6:+.1f} us/step = {100 * over / step:+.2f}% of a step "
          f"(block spread {min(diffs) * 1e6:+.1f} .. {max(diffs) * 1e6:+.1f} us)")
    print(f"direct cost of one step's marks and read-out: {direct * 1e6:.2f} us = {100 * direct / step:.3f}% of a step")


if __name__ == "__main__":
    main()
