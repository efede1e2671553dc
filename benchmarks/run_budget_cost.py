"""`stbench run W --set ... --budget B` in this tree against an earlier revision's, side by side
in one run: what a budget buys (rounds, a concluded finding) when the cells are windows of warm
processes, against whole cells a round.

    python benchmarks/run_budget_cost.py [--before REV] [--budget 60] W --set k=v1,v2 ...

Each version in turn runs the same command alone. From its runs.csv: the rows (a window, or
before the windows a cell), the paired rounds each cell got, the seconds that feed samples/s
(each ok row's `train_s`) and the command's wall time; and the study's finding as it printed
it. REV's stbench is a git worktree of that revision first on PYTHONPATH (cell_cost.py's
before_tree). A benchmark, not a test: it prints numbers and asserts nothing. Run it alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.cell_cost import ROOT, before_tree, rows  # noqa: E402


def one(argv: list[str], budget: float, out: Path, env: dict) -> dict:
    began = time.monotonic()
    done = subprocess.run(
        ["stbench", "run", *argv, "--budget", str(budget), "--out", str(out)],
        env={**env, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=10 * budget,
    )
    wall = time.monotonic() - began
    found = rows(out)
    ok = [r for r in found if r["status"] == "ok"]
    rounds = Counter(r["run_id"] for r in found)  # a cell's rows over its rounds share no id
    finding = next(
        (ln for ln in done.stdout.splitlines() if ln.startswith("Finding:")), "(no finding)"
    )
    return {
        "exit": done.returncode,
        "wall_s": wall,
        "rows": len(found),
        "rounds": len({r["repeat"] for r in found}),
        "cells": len(rounds),
        "timed_s": sum(float(r["train_s"] or 0) for r in ok),
        "finding": finding,
    }


def main() -> None:
    ask = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ask.add_argument("--before", default="28ce176")
    ask.add_argument("--budget", type=float, default=60.0)
    asked, study = ask.parse_known_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "before").mkdir()
        versions = {
            asked.before: before_tree(asked.before, scratch / "before"),
            "this tree": dict(os.environ),
        }
        try:
            for name, env in versions.items():
                got = one(study, asked.budget, scratch / name.replace(" ", "-"), env)
                print(
                    f"{name}: exit {got['exit']}, {got['wall_s']:.1f} s wall, {got['rows']} rows "
                    f"over {got['rounds']} rounds, {got['timed_s']:.1f} s timed\n  {got['finding']}"
                )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force"]
                + [str(scratch / "before" / "tree")],
                capture_output=True,
            )


if __name__ == "__main__":
    main()
