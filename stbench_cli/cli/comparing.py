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
) -> None:
    """Tables from any number of result folders: medians, intervals, speedups, scaling."""
    from ..report.compare import compare as build
    from ..store.files import find_folders
    from ..store.results import read_results, read_series

    folders = find_folders(paths)
    records = [{**r, "study": str(f)} for f in folders for r in read_results(f)]
    epochs = [{**r, "study": str(f)} for f in folders for r in read_series(f, "epochs.csv")] if plot else []
    text = build(records, row_axis=rows, cols=cols, metric=metric, baseline=baseline, out=out, plot=plot,
                 width=render.table_width(), epochs=epochs)
    render.out.print(text, markup=False, end="")
