"""What a cell costs besides its training: this tree's stbench against an earlier
revision's, side by side in one run.

    python benchmarks/cell_cost.py [--before REV] [--rounds 3] [--cells 4] [--out FILE]

Each round runs, with each version in turn (before, after, so that the machine's drift falls on
both), a one-cell and a CELLS-cell `stbench run cnn-strain --smoke --epochs 1` study. REV's
stbench is a git worktree of that revision put first on PYTHONPATH, so that the console script,
every cell's process and the workloads import its code; the same venv serves both.

While a study runs, its runs.csv is watched and each row's arrival noted. A cell's fixed cost
is the time from the row before it (the study's launch, for the first cell) to its own row,
less its wall time (runs.csv `wall_s`, the cell's training and evaluation): the load check, the
process, imports, data and model, warm-up, the figures, the row. The first cell of a study also
carries the study's own start (the CLI, the inventory, the plan), so the per-cell figures are
the later cells'. Also printed: each study's command time less its cells' wall time, per cell,
and the last cell's timeline (the second after its launch at which each phase began; before
this change it counted from the process's start, to the second).

Run it alone: another process on the machine moves every figure. A benchmark, not a test: it
prints numbers and asserts nothing.
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
STUDY = ["run", "cnn-strain", "--smoke", "--epochs", "1"]


def before_tree(rev: str, scratch: Path) -> dict[str, str]:
    """REV checked out as a worktree, importable as `stbench` (its two code folders joined as
    pyproject.toml's package-dir joins them): the environment that runs it."""
    tree = scratch / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
        check=True,
        capture_output=True,
    )
    (tree / "stbench_cli" / "workloads").symlink_to(tree / "workloads")
    site = scratch / "site"
    site.mkdir()
    (site / "stbench").symlink_to(tree / "stbench_cli")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def rows(folder: Path) -> list[dict]:
    # read as text, not by store.files.read_runs: REV's stbench may write a schema this one
    # refuses, and only the row count and wall_s are needed
    found = list(folder.glob("*/runs.csv"))
    if not found:
        return []
    try:
        with open(found[0], newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def study(env: dict, out: Path, cells: int) -> dict:
    """One study: its command seconds, each cell's fixed cost, the last cell's timeline."""
    stbench = shutil.which("stbench") or "stbench"
    argv = [stbench, *STUDY, "--rounds", str(cells), "--out", str(out)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    arrived: list[float] = []
    while proc.poll() is None:
        n = len(rows(out))
        while len(arrived) < n:
            arrived.append(time.perf_counter() - start)
        time.sleep(0.01)
    total = time.perf_counter() - start
    done = rows(out)
    while len(arrived) < len(done):  # a row that landed between the last look and the exit
        arrived.append(total)
    walls = [float(r["wall_s"]) for r in done]
    fixed = [arrived[i] - (arrived[i - 1] if i else 0.0) - walls[i] for i in range(len(done))]
    logs = sorted(out.glob("*/logs/*.log"), key=lambda p: p.stat().st_mtime)
    timeline = next(
        (ln for ln in reversed(logs[-1].read_text().splitlines()) if "phases first" in ln), ""
    )
    ok = proc.returncode == 0 and len(done) == cells
    return {"total": total, "walls": walls, "fixed": fixed, "timeline": timeline, "ok": ok}


def summary(name: str, runs: list[dict], cells: int) -> list[str]:
    singles = [r["total"] - sum(r["walls"]) for r in runs if len(r["walls"]) == 1]
    many = [r for r in runs if len(r["walls"]) == cells]
    later = [f for r in many for f in r["fixed"][1:]]
    per = [(r["total"] - sum(r["walls"])) / cells for r in many]
    failed = sum(not r["ok"] for r in runs)
    out = [
        f"{name}:",
        f"  one-cell study, command less the cell's wall:  {statistics.median(singles):5.2f} s "
        f"(median of {len(singles)}: {', '.join(f'{x:.2f}' for x in singles)})",
        f"  fixed cost of a cell after the first:           {statistics.median(later):5.2f} s "
        f"(median of {len(later)} cells; {min(later):.2f} to {max(later):.2f})",
        f"  {cells}-cell study, command less walls, per cell:  {statistics.median(per):5.2f} s "
        f"(median of {len(per)}: {', '.join(f'{x:.2f}' for x in per)})",
        f"  a cell's timeline: {many[-1]['timeline'] if many else '-'}",
    ]
    return out + ([f"  {failed} studies did not end ok"] if failed else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="d3767ec", help="the revision to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cells", type=int, default=4)
    ap.add_argument("--out", type=Path, help="also write the summary here")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="stbench-cell-cost-"))
    try:
        versions = {f"before ({args.before})": before_tree(args.before, scratch), "after": None}
        runs: dict[str, list[dict]] = {name: [] for name in versions}
        for r in range(args.rounds):
            for v, (name, env) in enumerate(versions.items()):
                for cells in (1, args.cells):
                    folder = scratch / f"v{v}-{r}-{len(runs[name])}"
                    runs[name].append(study(env or dict(os.environ), folder, cells))
                    print(f"round {r + 1}, {name}, {cells} cells: {runs[name][-1]['total']:.1f} s")
        lines = [
            f"cnn-strain --smoke --epochs 1 on {os.cpu_count()} CPUs, {args.rounds} rounds "
            f"({sys.version.split()[0]})",
            *(ln for name in versions for ln in summary(name, runs[name], args.cells)),
        ]
        print("\n".join(lines))
        if args.out:
            args.out.write_text("\n".join(lines) + "\n")
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch / "tree")],
            capture_output=True,
        )
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
