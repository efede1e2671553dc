"""`stbench report`: one self-contained HTML report (and Markdown with PNGs) of result folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import render
from .app import app
from .comparing import SKIPPED_HELP, paragraph
from .options import Out


@app.command(
    "report",
    short_help="A report to publish: report.html, report.md and figures.",
    help=paragraph(f"""A report to publish: every study's finding and a headline figure first, then
per study its tables and figures. A tune is its answer (its step studies with --full; a tune given
alone is drawn with its steps). {SKIPPED_HELP}"""),
)
def report_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATHS", help="result folders, or folders holding them"),
    ],
    out: Out = Path("report"),
    full: Annotated[
        bool, typer.Option(help="each tune's step studies too (each is a study of its own)")
    ] = False,
) -> None:
    from ..report import html, read
    from ..store.files import find_folders
    from ..store.host import allowed_cpus

    def progress(line: str) -> None:  # drawing the figures takes a while: say where it is
        render.err.print(line, markup=False, highlight=False)

    render.out_folder(out)
    # a tune is its answer on the first screen; its steps (a study each, most of the drawing)
    # only with --full, or where nothing but tunes was given: a report draws what it was given
    found = find_folders(paths, tune_steps=full) or find_folders(paths)
    progress(f"reading {len(found)} result folder{'s' if len(found) != 1 else ''}")
    folders, skipped = read.read(found, read.SERIES)
    # one process per CPU this one may use draws the figures (the console script guards its
    # main module, as a spawned worker needs)
    cpus = len(allowed_cpus())
    written = html.build(folders, skipped, progress, tuple(tunes(paths)), workers=cpus)
    progress(f"writing {out / 'report.html'}")
    path = html.write_report(written, out)
    render.out.print(
        f"wrote {path} and {path.with_suffix('.md')} (figures beside it)", soft_wrap=False
    )
    render.left_out(skipped)


def tunes(paths: list[Path]) -> list[tuple[str, str, str]]:
    """Each tune's (folder, command, answer) under `paths`, for the report's first screen."""

    from ..plan.judge import finding
    from ..store.files import TUNE_FILE, find_tunes, read_tune

    out = []
    for root in find_tunes(paths):
        try:
            state = read_tune(root)
            out.append((root.name, f"stbench tune {state['spec']['workload']}", finding(state)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            render.warn(f"{root / TUNE_FILE} could not be read ({exc}): its answer is left out")
    return out
