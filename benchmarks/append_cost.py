"""What recording one finished cell costs as a study grows: this tree's store against an earlier
revision's, side by side in one run.

    python benchmarks/append_cost.py [--before REV] [--cells 1000] [--every 250]

A cell is recorded as `store.files.write_cell` records it: its epochs.csv rows, its system.csv
rows, then its runs.csv row, each through `store.files.append`. The rows are a committed study's
own (results/reference/ref-cpu2-cnn-strain-thesis-lr-warmup: 12 epoch rows and 94 system rows
a cell, its runs.csv row), given new run_ids. Printed: the milliseconds one cell's three appends
took at each `--every` cells (the median of the `--every` cells before it), and the files' sizes.

REV's store is a git worktree of that revision (cell_cost.py's before_tree). Run it alone: another
process moves every figure. A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.cell_cost import before_tree  # noqa: E402

STUDY = ROOT / "results" / "reference" / "ref-cpu2-cnn-strain-thesis-lr-warmup"


def _rows(name: str) -> tuple[list[str], list[dict]]:
    with open(STUDY / name, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def measure(cells: int, every: int, folder: Path) -> list[dict]:
    """Run inside the version measured: its `stbench.store.files.append`."""
    from stbench.store.files import append

    one = _rows("runs.csv")[1][0]["run_id"]
    tables = []  # runs.csv last, as write_cell writes it
    for name in ("epochs.csv", "system.csv", "runs.csv"):
        columns, rows = _rows(name)
        tables.append((folder / name, columns, [r for r in rows if r["run_id"] == one]))
    took, out = [], []
    for i in range(1, cells + 1):
        run_id = f"cell-{i:05d}"
        began = time.perf_counter()
        for path, columns, rows in tables:
            append(path, [{**r, "run_id": run_id} for r in rows], columns, run_id)
        took.append(time.perf_counter() - began)
        if i % every == 0:
            out.append(
                {
                    "cells": i,
                    "ms": 1000 * statistics.median(took[-every:]),
                    "mb": sum(p.stat().st_size for p in folder.glob("*.csv")) / 1e6,
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="an earlier revision to run beside this tree")
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one version's measurement, in a process of its own
        print(json.dumps(measure(args.cells, args.every, args.child)))
        return
    scratch = Path(tempfile.mkdtemp(prefix="stbench-append-cost-"))
    versions = {"after": dict(os.environ)}
    if args.before:
        versions = {"before": before_tree(args.before, scratch / "before"), **versions}
    try:
        got = {}
        for name, env in versions.items():
            folder = scratch / f"{name}-study"
            folder.mkdir()
            command = [sys.executable, __file__, "--child", str(folder)]
            command += ["--cells", str(args.cells), "--every", str(args.every)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            got[name] = json.loads(done.stdout)
        print("ms to record one cell (its epochs, system and runs rows), by cells already there")
        for i, point in enumerate(got["after"]):
            line = f"{point['cells']:>6} cells, {point['mb']:6.1f} MB of CSV:"
            for name in versions:
                line += f"  {name} {got[name][i]['ms']:8.2f} ms"
            print(line, flush=True)
    finally:
        if args.before:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(scratch / "before" / "tree")],
                cwd=ROOT,
                capture_output=True,
            )
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
