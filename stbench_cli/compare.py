"""`stbench compare`: find result folders, read them, build the report, write it out."""

from __future__ import annotations

from pathlib import Path

from . import results, tables
from .errors import StbenchError


def find_folders(paths: list[Path]) -> list[Path]:
    """Each path is a result folder (has runs.csv) or a folder of result folders."""
    found = []
    for p in paths:
        if not p.exists():
            raise StbenchError(f"{p} does not exist; give result folders (each holds runs.csv) or their parent")
        if (p / "runs.csv").exists():
            found.append(p)
            continue
        inner = sorted(q.parent for q in p.glob("*/runs.csv"))
        if not inner:
            raise StbenchError(f"{p} holds no result folder (no runs.csv in it or its sub-folders)")
        found.extend(inner)
    return found


def run(paths: list[Path], *, rows: str, cols: str, metric: str, baseline: str | None, out: Path | None,
        plot: bool) -> str:
    base = None
    if baseline:
        key, sep, value = baseline.partition("=")
        if not sep or not key or not value:
            raise StbenchError(f"--baseline {baseline!r} is malformed; expected key=value, e.g. device=cpu")
        base = (key, value)
    all_rows = [row for folder in find_folders(paths) for row in results.read_runs(folder)]
    df = tables.frame(all_rows)
    text = tables.report(df, metric=metric, rows=rows, cols=cols, baseline=base)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        summary = tables.summarize(df, metric).drop(columns=["values"])
        summary.rename(columns={"label": "device"}).to_csv(out / "compare.csv", index=False)
    if plot:
        from .plots import write_plots

        write_plots(df, out or Path("."))
    return text
