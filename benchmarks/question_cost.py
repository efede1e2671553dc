"""What a gpu-vs-cpu question costs besides its measurements: this tree's stbench against an
earlier revision's, side by side in one run.

    python benchmarks/question_cost.py [--before REV] [--budget 60] [--keep DIR] [WORKLOAD ...]

For each workload (all four by default), each version in turn runs `stbench gpu-vs-cpu W
--budget B` alone. From its runs.csv: the measurements (a window, or before the engine a cell),
the seconds that feed samples/s (each ok row's `train_s`), and the gap per measurement: the
command's wall time less those seconds, over the measurements (what the study paid besides its
timed steps: processes, imports, data, models, warm-ups, switches, the answer), split three ways
(the processes' first windows, each later window's switch and re-warm, and the rest: the CLI,
the warm server, the answer and its picture), and each later window's switch by size (the
study's mean moves with where its rounds went). Also: the paired rounds each size got, and how
each size ended (concluded, equal, or open) as the answer says.

REV's stbench is a git worktree of that revision put first on PYTHONPATH (cell_cost.py's
before_tree); a study still running at 5 x the budget is ended and said so. `--keep DIR` keeps
this tree's study folders there (the committed reference studies are such folders).

Run it alone: another process moves every figure. A benchmark, not a test: it
prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.cell_cost import before_tree  # noqa: E402

WORKLOADS = ("cnn-strain", "lstm-era5", "stnn", "dcrnn-pems")


def study(workload: str, budget: float, out: Path, env: dict) -> dict:
    """One question's figures."""
    began = time.monotonic()
    command = ["stbench", "gpu-vs-cpu", workload, "--budget", str(budget), "--out", str(out)]
    # a session of its own: a study ended at its limit takes the cells it started with it
    proc = subprocess.Popen(
        command,
        env={**env, "COLUMNS": "100"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=5 * budget)
        done = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        for p in psutil.process_iter():  # cells lead process groups of their own, in its session
            try:
                if os.getsid(p.pid) == proc.pid:
                    p.kill()
            except (OSError, psutil.Error):
                pass
        proc.communicate()
        done = subprocess.CompletedProcess(command, f"killed at {5 * budget:.0f} s", "", "")
    wall = time.monotonic() - began
    (folder,) = out.iterdir()
    with (folder / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    ok = [r for r in rows if r["status"] == "ok"]
    timed = sum(float(r["train_s"]) for r in ok)
    # where the rest went: a row's setup_s is what its process ran since its window before (its
    # first window: the fork, the build, the warm-up); all else ran outside the windows' processes
    setup = [(r["job_id"], float(r["setup_s"] or 0)) for r in rows]
    firsts = {}
    for job, s in setup:
        firsts.setdefault(job, s)
    builds = sum(firsts.values())
    switches = sum(s for _, s in setup) - builds
    # each size's later windows alone: the whole study's mean moves with where its rounds went
    # (a study that spent its rounds on the smallest size switches cheaply)
    seen, by_size = set(), {}
    for r, (job, s) in zip(rows, setup):
        if job in seen:
            by_size.setdefault(r["batch_size"], []).append(s)
        seen.add(job)
    params = [json.loads(r["params"]) for r in rows]
    rounds = Counter()
    for r, p in zip(rows, params):
        rounds[r["batch_size"]] = max(rounds[r["batch_size"]], int(r["repeat"]) + 1)
    blocks = done.stdout.split("\n\n")
    finding = next((x for x in blocks if x.startswith("Finding")), "")
    # the GPUs' predictions where no GPU ran: the heading's line and the table under it
    heading = next((i for i, x in enumerate(blocks) if x.startswith("### PREDICTED")), None)
    predicted = blocks[heading + 1] if heading is not None and heading + 1 < len(blocks) else ""
    return {
        "workload": workload,
        "exit": done.returncode,  # or how it was ended
        "wall_s": wall,
        "measurements": len(rows),
        "timed_s": timed,
        "gap_s": (wall - timed) / max(len(rows), 1),
        "builds_s": builds,
        "switch_s": switches / max(len(rows) - len(firsts), 1),
        "switch_by_size": {k: sum(v) / len(v) for k, v in by_size.items()},
        "outside_s": wall - timed - builds - switches,
        "rounds": dict(rounds),
        "finding": " ".join(finding.split()),
        "predicted": predicted.split("\n"),
        "stopped": [x for x in done.stdout.splitlines() if x.startswith("gpu-vs-cpu:")],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--before", help="an earlier revision to run beside this tree")
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--keep", type=Path, help="keep this tree's study folders here")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="stbench-question-cost-"))
    versions = {"after": dict(os.environ)}
    if args.before:
        versions = {"before": before_tree(args.before, scratch / "before"), **versions}
    try:
        for w in args.workloads:
            for name, env in versions.items():
                out = scratch / f"{name}-{w}"
                out.mkdir()
                got = study(w, args.budget, out, env)
                print(
                    f"{w} {name}: exit {got['exit']}, {got['wall_s']:.1f} s, "
                    f"{got['measurements']} measurements, {got['timed_s']:.1f} s timed, "
                    f"gap {got['gap_s']:.2f} s a measurement; rounds by size {got['rounds']}"
                )
                print(
                    f"  the gap: {got['builds_s']:.1f} s in processes' first windows (fork, "
                    f"build, warm-up), {got['switch_s']:.3f} s a later window (its switch and "
                    f"re-warm), {got['outside_s']:.1f} s outside them (start, answer, picture)"
                )
                by_size = ", ".join(f"{k}: {v:.3f}" for k, v in got["switch_by_size"].items())
                print(f"  a later window's switch and re-warm by size, s: {by_size}")
                for line in got["stopped"]:
                    print(f"  {line}")
                print(f"  {got['finding']}", flush=True)
                for line in got["predicted"]:
                    print(f"  {line}", flush=True)
                if args.keep and name == "after":
                    args.keep.mkdir(parents=True, exist_ok=True)
                    for folder in out.iterdir():
                        shutil.copytree(folder, args.keep / folder.name)
    finally:
        if args.before:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(scratch / "before" / "tree")],
                cwd=Path(__file__).resolve().parent.parent,
                capture_output=True,
            )
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
