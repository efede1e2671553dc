"""`stbench tune`: the CPU at its best within a time budget (runner/tune.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from . import render, render_run
from .app import app
from .options import FixedSets, Out, Preset, Resume, Seed, Smoke, StudyWorkload

ReferenceBatch = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        metavar="N",
        help="the reference batch (default: the preset's); half and twice it are tried",
    ),
]
Budget = Annotated[
    float | None,
    typer.Option(
        "--budget",
        metavar="SECONDS",
        help="wall seconds for the search, its confirming step included (default 600)",
    ),
]
Rounds = Annotated[
    int, typer.Option("--rounds", metavar="N", help="rounds of every value a step tries (>= 2)")
]
Window = Annotated[
    float, typer.Option("--window", metavar="SECONDS", help="seconds of timed training a cell")
]


@app.command(short_help="Find the CPU's best configuration, lever by lever.")
def tune(
    workload: StudyWorkload = None,
    set_: FixedSets = None,
    preset: Preset = None,
    smoke: Smoke = False,
    batch_size: ReferenceBatch = None,
    budget: Budget = None,
    rounds: Rounds = 3,
    window: Window = 8.0,
    eval_samples: Annotated[
        int, typer.Option(metavar="N", help="validation samples an evaluation judges")
    ] = 1024,
    seed: Seed = 0,
    out: Out = Path("results"),
    resume: Resume = None,
) -> None:
    """Search the levers a fair CPU baseline needs (threads, binding, precision, compile, the
    allocator, workers, batch size), one at a time from torch's defaults, each step a study
    in one folder; print the best configuration, its gain and the options that reproduce it."""
    from ..runner import warm

    warm.start_server(workload)  # the cells' server imports torch while this process plans
    from ..plan.judge import finding
    from ..plan.tuning import TuneSpec
    from ..runner import envinfo
    from ..runner.tune import Tuner
    from ..store.files import read_tune
    from .running import import_what_a_study_needs, run_with_progress

    spec, root = _request(
        workload,
        resume,
        budget,
        TuneSpec(
            workload or "",
            preset,
            tuple(set_ or ()),
            batch_size,
            rounds,
            window,
            budget or 600.0,
            eval_samples,
            seed,
            smoke,
        ),
        out,
    )
    import_what_a_study_needs()
    env = envinfo.inventory()
    run = lambda plan: run_with_progress(plan, env, None)  # noqa: E731

    def watch(plan, seconds: float):  # a windowed step: a bar over its share of the budget
        return render_run.budget_progress(seconds, plan.cells)

    kept = f"every window measured is kept in {root}; finish it: stbench tune --resume {root}"
    with render.interrupted(lambda: kept):
        Tuner(spec, root, env, run, tuple(sys.argv), render.note, watch).search()
    render.out.print(render.folded(finding(read_tune(root))), markup=False)
    render.out.print(f"tune in {root} (tune.json, tune.csv; a study per step)", markup=False)


def _request(workload: str | None, resume: Path | None, budget: float | None, asked, out: Path):
    """(the tune's request, its folder): asked anew, or read back from --resume DIR with a new
    --budget if one is given."""
    from ..errors import StbenchError, a_result_folder
    from ..plan import registry
    from ..plan.planner import new_folder
    from ..plan.tuning import TUNE_FILE, TuneSpec

    if resume is None:
        if not workload:
            raise StbenchError(
                "stbench tune needs a WORKLOAD (see `stbench list`), or --resume DIR"
            )
        registry.get(workload)
        return asked.check(), new_folder(out, f"{workload}-tune")
    a_result_folder(resume)
    if not (resume / TUNE_FILE).exists() and (resume / "manifest.json").exists():
        from ..plan.planner import finished_by

        raise StbenchError(
            f"--resume {resume}: not a tune's folder; finish it with: {finished_by(resume)}"
        )
    try:
        stored = TuneSpec.from_dict(json.loads((resume / TUNE_FILE).read_text())["spec"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StbenchError(f"--resume {resume}: not a tune folder ({TUNE_FILE}: {exc})") from None
    if workload and workload != stored.workload:
        raise StbenchError(f"--resume {resume} holds a {stored.workload} tune, not {workload}")
    return (
        TuneSpec.from_dict({**stored.to_dict(), "budget_s": budget}) if budget else stored
    ).check(), resume
