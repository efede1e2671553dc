"""`stbench compare`: tables from any number of result folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import render
from .app import app


@app.command()
def compare(
    paths: Annotated[list[Path], typer.Argument(help="result folders, or folders holding them")],
    rows: Annotated[str, typer.Option(help="row axis")] = "epochs",
    cols: Annotated[str, typer.Option(help="column axis")] = "device",
    metric: Annotated[str, typer.Option(help="runs.csv column to tabulate")] = "wall_s",
    baseline: Annotated[Optional[str], typer.Option(help="key=value of the column to compare against")] = None,
    out: Annotated[Optional[Path], typer.Option(help="also write compare.md and compare.csv here")] = None,
    plot: Annotated[bool, typer.Option(help="write PNG plots (into --out, or the current folder)")] = False,
    full: Annotated[bool, typer.Option(help="every table of each study (wall time, time and memory shares, scaling)")] = False,
) -> None:
    """Per study, headed by its folder and command: its finding (the answer, with 95% intervals) and the table behind it."""
    from ..report.noise import study_flags
    from ..report.compare import compare as build
    from ..store.files import find_folders, read_runs
    from ..store.results import read_series, tag

    folders = find_folders(paths)
    records = [{**r, **tag(f)} for f in folders for r in read_runs(f)]
    epochs = [{**r, **tag(f)} for f in folders for r in read_series(f, "epochs.csv")] if plot else []
    text = build(records, row_axis=rows, cols=cols, metric=metric, baseline=baseline, out=out,
                 plot=plot, width=render.table_width(), epochs=epochs, full=full,
                 flagger=study_flags)
    render.out.print(text, markup=False, end="")


@app.command()
def gate(
    baseline: Annotated[Path, typer.Argument(help="baseline result folder (or a folder of them)")],
    new: Annotated[Path, typer.Argument(help="the new run's result folder (or a folder of them)")],
    metric: Annotated[Optional[list[str]], typer.Option(help="runs.csv columns to judge (default: wall_s)")] = None,
    margin: Annotated[float, typer.Option(help="relative change that counts as a regression when significant")] = 0.10,
) -> None:
    """Judge NEW's cells against BASELINE's (a CI gate). Exit 1 when a cell is significantly worse by
    more than --margin, or no longer ends ok; exit 3 when none is, but a cell is worse by more than
    --margin without being significant: inconclusive, and the line names the repeats per side that
    could settle it; exit 0 otherwise."""
    from ..report.gate import exit_code, lines
    from ..report.gate import gate as judge
    from ..store.files import find_folders, read_runs

    def rows(path: Path) -> list[dict]:
        return [r for f in find_folders([path]) for r in read_runs(f)]

    verdicts = judge(rows(baseline), rows(new), tuple(metric or ("wall_s",)), margin)
    for line in lines(verdicts, margin):
        render.out.print(line, markup=False, soft_wrap=True)
    raise typer.Exit(exit_code(verdicts))
