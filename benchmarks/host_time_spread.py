"""How far the anatomy's "host's own time of a step" moves between repeats in one process: the
figure a GPU prediction's host term rests on (child/anatomy.py's `_host_s`: the gaps between a
step's top-level operators in torch's profiler at batch 2 on one thread, medians of HOST_STEPS
steps), beside the way it was measured before (a step's time less the time inside its
operators: `difference_s` here).

    python benchmarks/host_time_spread.py [--repeats 4] [WORKLOAD ...]

For each workload (all four by default) at its default preset: the task built as the anatomy
builds it, then each way `--repeats` times in a row, printing each figure beside the median
step and the median time inside its operators. Where the two medians are close (a step whose
kernels dominate), the difference is noise and its figures scatter around zero (clamped there).

Run it alone: another process moves every figure. A benchmark, not a test: it prints numbers
and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORKLOADS = ("cnn-strain", "lstm-era5", "stnn", "dcrnn-pems")


class _Inside(TorchDispatchMode):
    """The seconds inside a step's operators (their kernels and the dispatch below the mode)."""

    def __init__(self):
        super().__init__()
        self.seconds = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        began = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.seconds += time.perf_counter() - began
        return out


def difference_s(step, x, y, steps: int = 7) -> tuple[float, float, float]:
    """The earlier figure: (median step, median inside its operators, their difference clamped
    at 0), each over `steps` steps after two untimed."""
    step(x, y)
    step(x, y)
    plain, inside = [], []
    for _ in range(steps):
        began = time.perf_counter()
        step(x, y)
        plain.append(time.perf_counter() - began)
        counter = _Inside()
        with counter:
            step(x, y)
        inside.append(counter.seconds)
    a, b = statistics.median(plain), statistics.median(inside)
    return a, b, max(a - b, 0.0)


def spread(workload: str, repeats: int) -> None:
    import torch

    from stbench.child import anatomy
    from stbench.child.allocator import keep_freed_memory
    from stbench.contract import BuildContext
    from stbench.plan.planner import preset_params
    from stbench.plan.registry import get

    params, _ = preset_params(workload, "default")
    keep_freed_memory()  # the policy the anatomy runs under (allocator=keep, the default)
    torch.manual_seed(0)
    task = get(workload).build(params, BuildContext(0, 0, 1, "cpu"))
    optimizer = (task.optim.factory or torch.optim.Adam)(task.model.module.parameters(), lr=1e-4)
    for group in optimizer.param_groups:
        group["foreach"] = True
    step = anatomy._stepper(task, optimizer)
    torch.set_num_threads(1)
    kinds = anatomy._kinds(task, 2, int(params.get("max_steps", 0) or 0))
    for weight, (x, y) in kinds:
        before = [difference_s(step, x, y) for _ in range(repeats)]
        now = [anatomy._host_s(step, x, y) * 1e3 for _ in range(repeats)]
        step_ms = statistics.median(b[0] for b in before) * 1e3
        inside_ms = statistics.median(b[1] for b in before) * 1e3
        print(
            f"{workload:<11} weight {weight:.2f}: step {step_ms:.2f} ms, inside its operators "
            f"{inside_ms:.2f} ms\n"
            f"  host's own, {repeats} repeats: step less inside "
            + ", ".join(f"{b[2] * 1e3:.2f}" for b in before)
            + " ms; gaps between operators "
            + ", ".join(f"{f:.2f}" for f in now)
            + " ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    for workload in args.workloads:
        spread(workload, args.repeats)


if __name__ == "__main__":
    main()
