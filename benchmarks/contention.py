"""A cell beside a busy core: sparse STNN at 60x168 alone and with one other core
kept busy by a loop this script starts and stops, side by side in one run, for stbench's
default threads (auto: physical cores less busy ones) and fixed thread counts.

    python benchmarks/contention.py [--rounds 2] [--budget 5] [--threads 0,2,1] [--out DIR]

Every measurement is a fresh `stbench run` cell (`--set time_budget=S` of training); idle and
busy alternate round by round (idle first, then busy first), so a shared machine's drift falls
on both. Before each cell the script records the load average and the other processes' CPU
use over half a second (the cell's own check says the same in its row), so a reader can see a
run disturbed by anyone else. It prints, per setting, median steps/s idle and busy, their
ratio, the threads each cell chose and whether it was marked contended; `--out` keeps the
studies and a summary.json. Run it on an otherwise quiet machine. A benchmark, not a test:
it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stbench.runner.hostprep import measure_others
from stbench.store.files import read_runs

CELL = ("stnn", "--set", "grid=60x168", "--set", "relations=sparse", "--epochs", "1")


def busy_loop() -> subprocess.Popen:
    """One core kept busy (a Python loop, as a shell `while :; do :; done` would)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(1.0)  # let it reach the run queue before the cell's own load check
    return proc


def one_cell(threads: int, budget: float, out: Path) -> dict:
    """One cell's row (threads, steps/s, why, contention) and the load just before it."""
    load, others = os.getloadavg()[0], measure_others(0.5)
    before = set(out.iterdir()) if out.exists() else set()
    exe = Path(sys.executable).parent / "stbench"
    cmd = [
        str(exe),
        "run",
        *CELL,
        "--set",
        f"time_budget={budget:g}",
        "--set",
        f"threads={threads}",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, capture_output=True, text=True, check=False)
    (folder,) = set(out.iterdir()) - before
    (row,) = read_runs(folder)
    return {
        "threads_asked": threads,
        "threads": row.get("threads", 0),
        "steps_per_s": row.get("steps_per_s", float("nan")),
        "status": row["status"],
        "threads_why": row["threads_why"],
        "contended": row["contended"],
        "load_1m_before": load,
        "others_cores_before": round(others, 2),
        "folder": folder.name,
    }


def measure(settings: list[int], rounds: int, budget: float, out: Path) -> list[dict]:
    runs = []
    for r in range(rounds):
        for condition in ("idle", "busy") if r % 2 == 0 else ("busy", "idle"):
            loop = busy_loop() if condition == "busy" else None
            try:
                for threads in settings:
                    row = {"round": r, "condition": condition, **one_cell(threads, budget, out)}
                    print(json.dumps(row), flush=True)
                    runs.append(row)
            finally:
                if loop:
                    loop.kill()
                    loop.wait()
    return runs


def summary(runs: list[dict], settings: list[int]) -> list[dict]:
    out = []
    for threads in settings:

        def of(cond, key="steps_per_s"):
            return [
                r[key] for r in runs if r["threads_asked"] == threads and r["condition"] == cond
            ]

        idle, busy = statistics.median(of("idle")), statistics.median(of("busy"))
        out.append(
            {
                "threads": "auto (0)" if threads == 0 else str(threads),
                "idle_steps_per_s": idle,
                "busy_steps_per_s": busy,
                "kept": busy / idle,
                "threads_idle": sorted(set(of("idle", "threads"))),
                "threads_busy": sorted(set(of("busy", "threads"))),
                "contended_busy": sorted(set(of("busy", "contended"))),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=5.0, help="training seconds per cell")
    ap.add_argument("--threads", default="0,2,1", help="settings: 0 is stbench's auto")
    ap.add_argument("--out", type=Path, default=None, help="keep the studies and summary.json")
    args = ap.parse_args()
    settings = [int(t) for t in args.threads.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="stbench-contention-"))
    out.mkdir(parents=True, exist_ok=True)
    start = {"load_1m": os.getloadavg()[0], "cores": os.cpu_count()}
    runs = measure(settings, args.rounds, args.budget, out)
    table = summary(runs, settings)
    print(
        f"\nsparse STNN 60x168, {args.budget:g} s of training per cell, {args.rounds} rounds, "
        f"{start['cores']} cores; load average at the start {start['load_1m']:.2f}, at the end "
        f"{os.getloadavg()[0]:.2f}"
    )
    print("threads   idle steps/s   busy steps/s   busy/idle   threads idle -> busy   contended")
    for t in table:
        print(
            f"{t['threads']:<9} {t['idle_steps_per_s']:>12.1f}   {t['busy_steps_per_s']:>12.1f}"
            f"   {t['kept']:>9.1%}   {t['threads_idle']} -> {t['threads_busy']}"
            f"   {t['contended_busy']}"
        )
    (out / "summary.json").write_text(
        json.dumps({"start": start, "runs": runs, "table": table}, indent=1)
    )
    print(f"studies and summary.json in {out}")


if __name__ == "__main__":
    main()
