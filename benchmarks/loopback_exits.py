"""How 2-node loopback worlds end: clean smoke cells, and each injected fault.

    python benchmarks/loopback_exits.py smoke [--runs 50]      # the issue's command, N times
    python benchmarks/loopback_exits.py faults                 # the four faults, then a resume

`smoke` runs `stbench run cnn-strain --smoke --strategy ddp --nproc 1 --nnodes 2 --epochs 1` as
consecutive studies, each in a fresh folder, and says per study its seconds, its row's status,
whether a rank aborted (a `terminate called` or `SIGABRT` in the cell's log) and the load average
while it ran; then how many aborted and the slowest study. Before the fix about 1 in 4 such
studies had a rank abort at exit and took 5 min 5 s (torchrun's exit barrier), as `ok`.

`faults` runs one study of the tests' `faulty` workload (tests/fault_workload.py, registered
here as the tests register it) on a 2-node loopback world: a rank that `os._exit(1)`s mid-step,
one stuck in a collective, one that aborts at exit, a node whose torchrun agent is SIGKILLed,
and a clean cell; each cell's seconds from its start to its row, its status and reason; then a
resume (each fault happens once: the resume's cells run clean) and its rows. The machine's load
is printed with each figure: a 2-core machine shared with other work stretches every start-up.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMOKE = [
    "run",
    "cnn-strain",
    "--smoke",
    "--strategy",
    "ddp",
    "--nproc",
    "1",
    "--nnodes",
    "2",
    "--epochs",
    "1",
]


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def smoke(runs: int, out: Path) -> None:
    exe = shutil.which("stbench") or Path(sys.executable).parent / "stbench"
    seconds, aborted = [], 0
    print("| study | s | status | rank aborted | load before, after |\n|---|---|---|---|---|")
    for i in range(1, runs + 1):
        before, t0 = load(), time.monotonic()
        proc = subprocess.run(
            [str(exe), *SMOKE, "--out", str(out / str(i))], capture_output=True, text=True
        )
        took = time.monotonic() - t0
        (folder,) = (out / str(i)).iterdir()
        (row,) = list(csv.DictReader(open(folder / "runs.csv")))
        logs = " ".join(p.read_text(errors="replace") for p in (folder / "logs").glob("*.log"))
        abort = "terminate called" in logs or "SIGABRT" in logs or "SIGABRT" in row["reason"]
        seconds.append(took)
        aborted += abort
        print(
            f"| {i} | {took:.1f} | {row['status']} (exit {proc.returncode}) | "
            f"{'yes' if abort else 'no'} | {before:.1f}, {load():.1f} |",
            flush=True,
        )
    print(
        f"\n{runs} studies: {aborted} with a rank that aborted; seconds median "
        f"{statistics.median(seconds):.1f}, max {max(seconds):.1f}"
    )


def _register_faulty() -> None:
    """The tests' `faulty` workload, as an installed plugin is registered (tests/conftest.py)."""
    sys.path[:0] = [str(ROOT)]
    from tests.conftest import _register_test_workloads

    _register_test_workloads(Path(tempfile.mkdtemp(prefix="stbench-bench-site-")))


def _run(plan) -> list[tuple[dict, float]]:
    from stbench.runner import envinfo, study

    began, took = {}, {}
    rows = study.run_study(
        plan,
        envinfo.collect(),
        on_start=lambda s: began.update({s.run_id: time.monotonic()}),
        on_done=lambda s, r: took.update({s.run_id: time.monotonic() - began[s.run_id]}),
    )
    return [(r, took.get(r["run_id"], 0.0)) for r in rows]


def _print(rows: list[tuple[dict, float]]) -> None:
    print("| fault | s (start to row) | status | reason |\n|---|---|---|---|")
    for row, took in rows:
        fault = row.params["fault"]
        print(f"| {fault} | {took:.1f} | {row['status']} | {row['reason']} |", flush=True)


def faults(out: Path) -> None:
    _register_faulty()
    os.environ["STBENCH_CACHE"] = str(out / "cache")  # each fault happens once per cache folder
    from stbench.plan.planner import Request, plan_new, plan_resume
    from stbench.runner import envinfo

    env = envinfo.collect()
    plan = plan_new(
        Request(
            "faulty",
            strategies=("ddp",),
            nnodes=(2,),
            smoke=True,
            out=out,
            sets=("fault=exit,stuck,abort,lost,none",),
        ),
        env,
    )
    print(f"load before: {load():.1f}")
    _print(_run(plan))
    print(f"\nload after: {load():.1f}; the resume:")
    _print(_run(plan_resume("faulty", plan.folder, env)))
    print(f"\nload after the resume: {load():.1f}; {plan.folder}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("smoke", "faults"))
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the studies go (default: a new temporary folder)",
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix=f"stbench-{args.what}-"))
    out.mkdir(parents=True, exist_ok=True)
    smoke(args.runs, out) if args.what == "smoke" else faults(out)


if __name__ == "__main__":
    main()
