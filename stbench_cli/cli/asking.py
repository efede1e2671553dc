"""`stbench gpu-vs-cpu`: is the GPU worth it for this workload, and from what size (issue 37)."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from . import render
from .app import app
from .options import Out, Preset, Resume, Seed, Sets, Smoke, StudyWorkload, Timeout

Budget = Annotated[
    float,
    typer.Option(
        "--budget", help="wall seconds for the whole study, every round included (default 600)"
    ),
]
Sizes = Annotated[
    list[str] | None,
    typer.Option(
        "--sizes",
        help="values of the workload's size axis (default: the ones it declares, `stbench list`)",
    ),
]
Window = Annotated[
    float,
    typer.Option("--window", help="seconds of timed training per cell, after its warm-up"),
]
Gpu = Annotated[
    str,
    typer.Option(
        "--gpu",
        help="the GPU to ask about: cuda, cuda:N; none: the CPU's configurations only "
        "(default: cuda where torch sees one, else none)",
    ),
]
Rounds = Annotated[
    int,
    typer.Option(
        "--rounds", help="rounds of every cell before only the open comparisons' cells run again"
    ),
]
CudaGraphs = Annotated[
    bool,
    typer.Option(
        "--cuda-graphs",
        help="also try CUDA graphs on the GPU (torch.compile's reduce-overhead mode, "
        "compile time excluded)",
    ),
]


@app.command("gpu-vs-cpu")
def gpu_vs_cpu(
    workload: StudyWorkload = None,
    budget: Budget = 600.0,
    sizes: Sizes = None,
    window: Window = 2.0,
    rounds: Rounds = 2,
    gpu: Gpu = "",
    cuda_graphs: CudaGraphs = False,
    set_: Sets = None,
    preset: Preset = None,
    smoke: Smoke = False,
    seed: Seed = 0,
    out: Out = Path("results"),
    resume: Resume = None,
    timeout: Timeout = None,
) -> None:
    """Is the GPU worth it, and from what size? Sweeps the workload's size axis on the CPU (its
    defaults and its quick levers) and the GPU (its precision levers), each cell trained for the
    same window, in paired rounds until each size concludes or the budget ends; ends with the
    answer, its table and its picture.

    Examples:

      stbench gpu-vs-cpu lstm-era5 --budget 900

      stbench gpu-vs-cpu stnn --sizes 30x84 60x168 180x360 --budget 600
    """
    from ..runner import warm

    warm.start()  # the cells' server imports torch while this process plans
    from ..errors import StbenchError
    from ..plan.planner import plan_question, plan_resume
    from ..plan.question import Question
    from ..runner import envinfo
    from ..runner.question import answer
    from ..store import host
    from .running import exit_for, resume_line, run_with_progress, summary

    if not budget > 0 or not window > 0:
        raise StbenchError("--budget and --window are seconds: give positive numbers")
    if rounds < 2:
        raise StbenchError(f"--rounds {rounds}: a paired interval needs at least 2 rounds")
    if not (workload or resume):
        raise StbenchError("stbench gpu-vs-cpu needs a WORKLOAD (see `stbench list`) or --resume")
    env = envinfo.inventory()
    if resume:
        plan = plan_resume(workload, Path(resume), env)
        if "question" not in plan.manifest:
            raise StbenchError(f"--resume {resume}: not a gpu-vs-cpu study (no question in it)")
    else:
        device = _gpu(gpu, env.gpu_count)
        q = Question(
            workload,
            tuple(sizes or ()),
            budget,
            window,
            device,
            cuda_graphs,
            smoke,
            preset,
            seed,
            Path(out),
            sets=tuple(set_ or ()),
            full_rounds=rounds,
        )
        plan = plan_question(q, env, host.physical_cores(), tuple(sys.argv))
        if not device:
            render.note(
                "no GPU here: the answer holds the CPU's best configuration besides its defaults "
                "against them (run it on a GPU machine for the GPU's)"
            )
    with render.interrupted(partial(resume_line, plan, "stbench gpu-vs-cpu")):
        rows = answer(plan, env, budget, lambda p: run_with_progress(p, env, timeout), render.note)
    if rows:
        summary(plan.folder)
        drawn = picture(plan.folder)
        if drawn:
            render.note(f"the picture: {drawn}")
    exit_for(rows, ("ok",))


def picture(folder: Path) -> Path | None:
    """The answer's picture (advantage against size) as gpu-vs-cpu.png in the study's folder."""
    from ..report import read
    from ..report.model import studies
    from ..report.question import figure

    (study,) = studies([read.read_folder(folder, ())])
    drawn = figure(study.runs, study.workload)
    if drawn is None:
        return None
    path = folder / "gpu-vs-cpu.png"
    path.write_bytes(drawn.png)
    return path


def _gpu(asked: str, visible: int) -> str:
    """The GPU device asked (`none`: the CPU only), by default cuda where torch sees one; the
    planner checks what was named."""
    if asked == "none":
        return ""
    return asked or ("cuda" if visible else "")
