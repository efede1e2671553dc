"""Instrumentation overhead: the trainer's timed step against a bare step, same batch,
same process, same model and optimizer (the method of `stbench doctor`'s overhead check).

    python benchmarks/overhead.py [--workload cnn-strain] [--preset default] [--steps 200] \
        [--blocks 10] [--device cpu]

Blocks of bare and instrumented steps alternate (ABBA) so that drift of the machine falls on
both equally; the overhead is the median over blocks of the per-step difference. A benchmark,
not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import time

from stbench.child.checks import overhead
from stbench.child.timing import Clock, StepMarks, resolve_marks
from stbench.device import Accelerator


def marks_cost(device: str, n: int) -> float:
    """Seconds per step spent taking a step's five marks, recording them and resolving them."""
    clock = Clock(Accelerator(device))
    t = time.perf_counter()
    marks = [
        StepMarks(clock.mark(), clock.mark(), clock.mark(), clock.mark(), clock.mark())
        for _ in range(n)
    ]
    resolve_marks(clock, marks)
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="cnn-strain")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    f = overhead(args.device, args.steps, args.blocks, args.workload, args.preset)
    step, over = f["bare_step_s"], f["overhead_s"]
    direct = marks_cost(args.device, 10_000)
    print(f"{args.workload} preset={args.preset} device={args.device} threads={f['threads']}")
    print(f"bare step: {step * 1e3:.3f} ms (median of {args.blocks} blocks x {args.steps} steps)")
    print(
        f"instrumentation: {over * 1e6:+.1f} us/step = {100 * over / step:+.2f}% of a step "
        f"(block spread {f['spread_s'][0] * 1e6:+.1f} .. {f['spread_s'][1] * 1e6:+.1f} us)"
    )
    print(
        f"direct cost of one step's marks and read-out: {direct * 1e6:.2f} us = "
        f"{100 * direct / step:.3f}% of a step"
    )


if __name__ == "__main__":
    main()
