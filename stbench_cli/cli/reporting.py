"""`stbench report`: one self-contained HTML report (and Markdown with PNGs) of result folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import render
from .app import app


@app.command()
def report(
    paths: Annotated[list[Path], typer.Argument(help="result folders, or folders holding them")],
    out: Annotated[Path, typer.Option(help="folder for report.html, report.md and the PNGs")] = Path("report"),
) -> None:
    """A report to publish: every study's finding and a headline figure first, then per study its tables and figures."""
    import pandas as pd

    from ..report.noise import study_flags
    from ..report import document, html
    from ..store.files import find_folders, read_runs
    from ..store.results import read_series, study_info, tag

    def progress(line: str) -> None:  # drawing the figures takes a while: say where it is
        render.err.print(line, markup=False, highlight=False)

    runs, epochs, system, studies = [], [], [], []
    found = find_folders(paths)
    progress(f"reading {len(found)} result folder{'s' if len(found) != 1 else ''}")
    for folder in found:
        rows, tagged = read_runs(folder), tag(folder)
        runs += [{**r, **tagged} for r in rows]
        epochs += [{**r, **tagged} for r in read_series(folder, "epochs.csv")]
        system += [{**r, **tagged} for r in read_series(folder, "system.csv")]
        studies.append(study_info(folder, rows))
    report = document.build(runs, epochs, system, pd.DataFrame(studies), progress=progress,
                            flagger=study_flags)
    progress(f"writing {out / 'report.html'}")
    path = html.write(report, out)
    render.out.print(f"wrote {path} and {path.with_suffix('.md')} (figures beside it)", soft_wrap=False)
