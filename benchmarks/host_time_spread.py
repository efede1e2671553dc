"""How far the anatomy's "host's own time of a step" moves between repeats in one process: the
figure a GPU prediction's host term rests on (child/anatomy.py's `_host_s`: a step's time at
batch 2 on one thread less the time spent inside its operators, medians of HOST_STEPS steps).

    python benchmarks/host_time_spread.py [--repeats 4] [WORKLOAD ...]

For each workload (all four by default) at its default preset: the task built as the anatomy
builds it, then `_host_s` itself `--repeats` times in a row, printing each figure beside the
median step and the median time inside its operators. Where the two medians are close (a step
whose kernels dominate), the difference is noise and the figures scatter around zero (clamped
there by `_host_s`).

Run it alone: another process moves every figure. A benchmark, not a test: it prints numbers
and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORKLOADS = ("cnn-strain", "lstm-era5", "stnn", "dcrnn-pems")


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
        plain, inside = [], []
        for _ in range(3):  # the median step and its operators' share, for scale
            began = time.perf_counter()
            step(x, y)
            plain.append(time.perf_counter() - began)
            counter = anatomy._Launches()
            with counter:
                step(x, y)
            inside.append(counter.inside_s)
        figures = [anatomy._host_s(step, x, y) * 1e3 for _ in range(repeats)]
        print(
            f"{workload:<11} weight {weight:.2f}: step {statistics.median(plain) * 1e3:8.2f} ms, "
            f"inside its operators {statistics.median(inside) * 1e3:8.2f} ms; host's own, "
            f"{repeats} repeats: " + ", ".join(f"{f:.2f}" for f in figures) + " ms"
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
