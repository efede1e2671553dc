"""`stbench compare` and `stbench gate`: result folders read, each study's view printed, or a new
run's cells judged against a baseline's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import render
from .app import app
from .options import OUT_HELP


def paragraph(text: str) -> str:
    """A help text as one paragraph: typer's rich help keeps the source's line breaks."""
    return " ".join(text.split())


SKIPPED_HELP = (
    "A result folder that cannot be read is named on stderr in one line (its file, "
    "line and column) and left out; the others are shown, and the exit code is 4."
)


@app.command(
    "compare",
    short_help="Each study's finding and the table behind it.",
    help=paragraph(f"""Per study, headed by its folder and command: its finding (the answer, with
95% intervals) and the table behind it. With no PATH, the newest study in ./results/.
{SKIPPED_HELP}"""),
)
def compare_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATHS",
            help="result folders, or folders holding them "
            "(default: the newest study in ./results/)",
            show_default=False,
        ),
    ] = None,
    rows: Annotated[str, typer.Option(metavar="KEY", help="row axis")] = "epochs",
    cols: Annotated[str, typer.Option(metavar="KEY", help="column axis")] = "device",
    metric: Annotated[
        str, typer.Option(metavar="COLUMN", help="runs.csv column to tabulate")
    ] = "wall_s",
    baseline: Annotated[
        str | None,
        typer.Option(metavar="KEY=VALUE", help="the column to compare against"),
    ] = None,
    out: Annotated[Path | None, typer.Option(metavar="FOLDER", help=OUT_HELP)] = None,
    plot: Annotated[
        bool,
        typer.Option(
            help="write each study's figures of time and memory as PNGs (into --out, or here)"
        ),
    ] = False,
    full: Annotated[
        bool,
        typer.Option(help="every table of each study (wall time, time and memory shares, scaling)"),
    ] = False,
) -> None:
    from ..report import read, text
    from ..report.model import studies
    from ..report.view import Options

    out = render.out_folder(out)
    series = ("epochs.csv",) if plot else ()
    asked = paths or [read.newest()]
    # a tune's answer first; its step studies only with --full (each is a study of its own)
    folders, skipped = read.read(asked, series, tune_steps=full)
    for answer in tune_answers(asked, brief=not full):
        render.out.print(answer, markup=False)
    if folders:
        shown = text.compare(
            studies(folders),
            Options(metric, rows, cols, baseline),
            render.table_width(),
            full,
            out,
            plot,
        )
        render.out.print(shown, markup=False, end="")
    render.left_out(skipped)


@app.command(
    "gate",
    short_help="Judge new results against a baseline (a CI gate).",
    help=paragraph(f"""Judge NEW's cells against BASELINE's (a CI gate). Exit 1 when a cell is
significantly worse by more than --margin, or no longer ends ok; exit 4 when none is but a result
folder was left out; exit 3 when a cell is worse by more than --margin without being significant:
inconclusive, and the line names the repeats per side that could settle it; exit 0 otherwise.
{SKIPPED_HELP.replace(", and the exit code is 4", "")}"""),
)
def gate_command(
    baseline: Annotated[
        Path,
        typer.Argument(metavar="BASELINE", help="baseline result folder (or a folder of them)"),
    ],
    new: Annotated[
        Path,
        typer.Argument(metavar="NEW", help="the new run's result folder (or a folder of them)"),
    ],
    metric: Annotated[
        list[str] | None,
        typer.Option(
            metavar="COLUMN",
            help="runs.csv columns to judge (default: wall_s; samples_per_s where a study is "
            "timed windows, whose wall_s is the window's set length)",
        ),
    ] = None,
    margin: Annotated[
        float,
        typer.Option(
            metavar="FRACTION", help="relative change that counts as a regression when significant"
        ),
    ] = 0.10,
) -> None:
    from ..report import read
    from ..report.judge import gate as judge
    from ..report.judge import gate_exit_code
    from ..report.text import lines

    (base, skipped), (now, skipped_new) = (read.read([p]) for p in (baseline, new))
    # a question's rows (any kind: the engine's windows) train for a set time: their wall_s is
    # the window's length, which the budget sets, and their samples/s the measure
    windows = any(f.context.kind for f in (*base, *now))
    verdicts = judge(
        [r for f in base for r in f.runs],
        [r for f in now for r in f.runs],
        tuple(metric or (("samples_per_s",) if windows else ("wall_s",))),
        margin,
    )
    for line in lines(verdicts, margin):
        render.out.print(line, markup=False, soft_wrap=True)
    render.left_out(skipped + skipped_new, gate_exit_code(verdicts, bool(skipped + skipped_new)))


def tune_answers(paths: list[Path], brief: bool = False) -> list[str]:
    """Each tune's answer under `paths` (its best configuration, its gain, what reproduces it),
    headed by its folder as a study is: what compare shows of a tune (its step studies follow
    with --full); `brief`: within a study's lines (report.text.STUDY_LINES)."""
    from ..plan.judge import finding
    from ..plan.tuning import TuneSpec
    from ..report.text import capped, fold_words
    from ..store.files import TUNE_FILE, find_tunes, read_tune

    out = []
    for root in find_tunes(paths):
        try:
            state = read_tune(root)
            said = finding(state, brief)
            command = TuneSpec.from_dict(state["spec"]).command()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            render.warn(f"{root / TUNE_FILE} could not be read ({exc}): its answer is left out")
            continue
        command = fold_words(command, render.table_width() or 100, "    ")  # as a study's command
        head = f"## {root.name} (a tune: its answer; its steps with --full)\n{command}\n\n"
        said = head + render.folded(said)
        out.append((capped(said) if brief else said) + "\n")
    return out
