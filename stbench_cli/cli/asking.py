"""`stbench gpu-vs-cpu`: is the GPU worth it for this workload, and from what size."""

from __future__ import annotations

import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from . import render, render_run
from .app import app
from .options import FixedSets, Out, Preset, Resume, Seed, Smoke, StudyWorkload

Budget = Annotated[
    float | None,
    typer.Option(
        "--budget",
        metavar="SECONDS",
        help="wall seconds for the study, every round included (default 600; a resumed "
        "study's own)",
    ),
]
Sizes = Annotated[
    list[str] | None,
    typer.Option(
        "--sizes", metavar="VALUE...", help="the size axis' values (default: the workload's own)"
    ),
]
Window = Annotated[
    float | None,
    typer.Option(
        "--window",
        metavar="SECONDS",
        help="a window's timed seconds, at least 3 steps (default: from the budget)",
    ),
]
Rounds = Annotated[
    int,
    typer.Option(
        "--rounds", metavar="N", help="paired rounds of every configuration before open pairs only"
    ),
]
Device = Annotated[
    str,
    typer.Option(
        "--device",
        metavar="DEVICE",
        help="the GPU held against the CPU: cuda, cuda:N, or none (the CPU's configurations "
        "only); default: cuda if torch sees one",
    ),
]
CudaGraphs = Annotated[
    bool,
    typer.Option(
        "--cuda-graphs",
        help="also CUDA graphs (torch.compile reduce-overhead) whatever the budget",
    ),
]
Gpus = Annotated[
    Path | None,
    typer.Option(
        "--gpus",
        metavar="FILE",
        help="your own GPU models to predict (gpus.toml's format: docs/gpu-predictions.md); "
        "default: T4, A100-80GB and H100 from stbench's table",
    ),
]


@app.command("gpu-vs-cpu", short_help="Is the GPU worth it, and from what size?")
def gpu_vs_cpu(
    workload: StudyWorkload = None,
    budget: Budget = None,
    sizes: Sizes = None,
    window: Window = None,
    rounds: Rounds = 6,
    device: Device = "",
    cuda_graphs: CudaGraphs = False,
    gpus: Gpus = None,
    set_: FixedSets = None,
    preset: Preset = None,
    smoke: Smoke = False,
    seed: Seed = 0,
    out: Out = Path("results"),
    resume: Resume = None,
) -> None:
    """Is the GPU worth it for WORKLOAD, and from what size? At each size of its size axis
    (`stbench list WORKLOAD`), the CPU at its defaults and its quick levers and the GPU at its
    precision levers, measured as short windows inside warm processes, in paired rounds until
    each pair concludes or the budget ends; then the answer, its table and its picture.

    \b
      stbench gpu-vs-cpu lstm-era5 --budget 60
      stbench gpu-vs-cpu stnn --sizes 1000 10000
      stbench gpu-vs-cpu cnn-strain --smoke --budget 30     # seconds, on a CPU
    """
    import time

    started = time.time()  # the budget is the command's: planning counts too
    from ..runner import warm

    warm.start_server(workload)  # the cells' server imports torch while this process plans
    from ..errors import StbenchError
    from ..plan.gpu_vs_cpu import Question
    from ..plan.planner import check_question, plan_question, stored_study, with_skips
    from ..runner import envinfo
    from ..runner.engine import answer
    from ..store import host
    from .running import exit_for, import_what_a_study_needs, resume_line

    cards = _cards(gpus)  # a bad file is one line before anything runs
    if (budget is not None and not budget > 0) or (window is not None and not window > 0):
        raise StbenchError("--budget and --window are seconds: give positive numbers")
    if rounds < 2:
        raise StbenchError(f"--rounds {rounds}: a paired interval needs at least 2 rounds")
    if not (workload or resume):
        raise StbenchError("stbench gpu-vs-cpu needs a WORKLOAD (see `stbench list`) or --resume")
    q = Question(
        workload,
        tuple(sizes or ()),
        budget or 600.0,
        window,
        "" if device == "none" else device,  # the machine's GPU, if any, once it is known
        cuda_graphs,
        smoke,
        preset,
        seed,
        Path(out),
        sets=tuple(set_ or ()),
        full_rounds=rounds,
    )
    # what a bad input can be refused for, before the inventory waits for the cells' server
    stored = stored_study(workload, Path(resume), "gpu-vs-cpu") if resume else None
    if stored is None:  # its budget against the CPU's configurations; a GPU's come after
        # its data too, while the cells' server imports torch
        check_question(q, host.physical_cores(), host.native_bf16()).check_data()
    import_what_a_study_needs()
    from ..report import gpu_vs_cpu_picture, plotting  # noqa: F401  (its picture's, likewise)

    env = envinfo.inventory()
    if env.gpus and gpus is None:  # this machine's card beside its measurement
        cards = _cards(None, env.gpus)
    if stored is not None:
        plan = with_skips(stored, env)
        # its own options, as run's and tune's resumes: its budget again, unless one is given
        budget = budget or float(plan.manifest["question"]["budget_s"])
    else:
        budget = q.budget_s
        device = _gpu(device, env.gpu_count)
        q = replace(q, gpu=device)
        plan = plan_question(
            q,
            env,
            host.physical_cores(),
            tuple(sys.argv),
            bf16=host.native_bf16(),
            data_checked=True,
        )
        if not device:
            render.note(
                "no GPU here: the answer holds the CPU's best configuration against its "
                "defaults, and predicts each GPU's"
            )
    deadline = started + budget
    from ..runner import predictions

    def anatomy(folder: Path, manifest: dict) -> None:
        """What a step is made of, for each GPU's prediction, before the windows (a resumed
        study's is kept)."""
        if cards and predictions.kept_anatomy(folder) is None:
            render.note("measuring what a step is made of, for each GPU's prediction")
            predictions.anatomy(folder, manifest, deadline - time.time())

    with (
        render.interrupted(partial(resume_line, plan, "stbench gpu-vs-cpu")),
        render_run.budget_progress(deadline - time.time(), plan.cells) as on_row,
    ):
        rows = answer(plan, env, deadline, render.note, on_row, first=anatomy)
    if rows and cards:
        render.note("predicting each GPU's step from this CPU's (docs/gpu-predictions.md)")
        # this machine's card: its operators at this host's own cost, measured now
        cards = predictions.on_this_host(cards, env.gpus, plan.manifest["question"]["gpu"])
        if not predictions.write_predictions(plan.folder, cards):
            render.note(
                "no prediction: the step's anatomy could not be measured here before the "
                "windows (it failed, or took more than a third of the budget left)"
            )
    if rows:
        render_run.print_answer(plan.folder, rows)
        drawn = picture(plan.folder)
        render.note(
            f"the picture: {drawn}"
            if drawn
            else "no picture: it draws the ratio against the size, and fewer than two sizes "
            "have one"
        )
    exit_for(rows, ("ok",))


def picture(folder: Path) -> Path | None:
    """The answer's picture (advantage against size) as gpu-vs-cpu.png in the study's folder."""
    from ..report import read
    from ..report.gpu_vs_cpu_picture import figure
    from ..report.model import studies, with_context

    (study,) = studies([read.read_folder(folder, ())])
    drawn = figure(with_context(study, question=True), study.workload, study.predicted)
    if drawn is None:
        return None
    path = folder / "gpu-vs-cpu.png"
    path.write_bytes(drawn.png)
    return path


def _gpu(asked: str, visible: int) -> str:
    """The GPU device asked (`none`: the CPU only), by default cuda where torch sees one; the
    planner checks what was named. A GPU named on a machine with none is refused: every GPU
    window would be a skipped row, and the question the CPU's half alone."""
    if asked == "none":
        return ""
    if asked and not visible:
        from ..errors import StbenchError

        raise StbenchError(
            f"--device {asked}: torch sees no GPU on this machine; --device none (the default "
            "here) "
            "asks the CPU's half of the question"
        )
    return asked or ("cuda" if visible else "")


def _cards(path: Path | None, here: tuple[dict, ...] = ()) -> list:
    """The GPU models the answer predicts: the user's file's cards (added to stbench's table),
    else stbench's defaults; with the card this machine has where the table knows it (its
    prediction then stands beside its measurement)."""
    from ..plan.predict import DEFAULT_GPUS, chosen, read_gpus, table_name

    shipped = read_gpus()
    present = [n for g in here if (n := table_name(str(g.get("name", "")), shipped))]
    if path is None:
        return chosen(shipped, [*DEFAULT_GPUS, *present])
    theirs = read_gpus(Path(path), shipped)
    return chosen(theirs, [n for n in theirs if n not in shipped or theirs[n] != shipped[n]])
