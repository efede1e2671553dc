"""Does a step right after a switch of configuration run slower than a steady one? What the
windows' re-warm (plan/pairs.py's rewarm_steps) should pay, measured.

    python benchmarks/rewarm.py [--rounds 12] [--scale 1] [WORKLOAD ...]

In this one process, through the real `Windows` of child/windows.py with its re-warm switched off
and windows of one step: each workload at its default setting and the configurations a
gpu-vs-cpu question alternates on a CPU (the defaults, threads=1, bf16). Every configuration is
built and warmed first; then round after round, each configuration in turn runs three one-step
windows: the first step after a switch, then two steps of the same configuration (every window
applies its whole configuration again, as the engine's do). Per configuration: the median of
(first step / median of the two steady ones) over the rounds, and its 10th-90th percentiles.

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

from stbench.child import windows as child  # noqa: E402
from stbench.plan.planner import preset_params  # noqa: E402
from stbench.plan.spec import RunSpec, WindowsJob, identify  # noqa: E402

CONFIGS = {"defaults": {}, "threads=1": {"threads": 1}, "bf16": {"precision": "bf16"}}
WORKLOADS = ("cnn-strain", "lstm-era5", "stnn", "dcrnn-pems")


def spec(workload: str, params: dict, config: dict, batch: int, round_: int) -> RunSpec:
    merged = tuple(sorted({**params, **config}.items()))
    return identify(RunSpec(workload, "cpu", "single", batch, 1, repeat=round_, params=merged))


def measure(workload: str, rounds: int, scale: int) -> dict[str, list[tuple[float, float]]]:
    params, engine = preset_params(workload, "default")
    batch = (engine.get("batch_size") or 32) * scale
    child.rewarm_steps = lambda step_s: 0
    w = child.Windows(WindowsJob((), 0.0, 1, time.time() + 3600))
    for name, config in CONFIGS.items():  # built and warmed: a window's worth, then 5 steps
        for _ in range(6):
            w.run(spec(workload, params, config, batch, 0))
    ratios: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}
    for r in range(rounds):
        for name, config in CONFIGS.items():
            steps = [w.run(spec(workload, params, config, batch, r))["figures"] for _ in range(3)]
            first, *steady = [s["train_s"] for s in steps]
            ratios[name].append((first / statistics.median(steady), first - min(steady)))
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--scale", type=int, default=1, help="the batch: the default times this")
    args = ap.parse_args()
    print("first step after a switch / steady step, and its excess in ms over the faster steady")
    print("one (median, p10-p90 over rounds)")
    for workload in args.workloads:
        for name, r in measure(workload, args.rounds, args.scale).items():
            ratio, excess = [x for x, _ in r], [1e3 * y for _, y in r]
            q, e = statistics.quantiles(ratio, n=10), statistics.quantiles(excess, n=10)
            print(
                f"{workload:11} {name:10} {statistics.median(ratio):.2f}x ({q[0]:.2f}-{q[-1]:.2f}x)"
                f"  {statistics.median(excess):+.1f} ms ({e[0]:+.1f} to {e[-1]:+.1f})"
            )


if __name__ == "__main__":
    main()
