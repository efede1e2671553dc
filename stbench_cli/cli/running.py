"""`stbench run` and `stbench profile`: plan a study, run it under a progress bar, render."""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from . import render, render_run
from .app import app
from .options import (
    AllWorkloads,
    Batches,
    Budget,
    Dask,
    Devices,
    DryRun,
    Epochs,
    Expect,
    Launcher,
    Nnodes,
    Nprocs,
    Out,
    Preset,
    Price,
    Resume,
    Rounds,
    SameSeed,
    Seed,
    Sets,
    Slurm,
    Smoke,
    StallLimit,
    Strategies,
    StudyWorkload,
    Timeout,
    Workload,
    prices_given,
)


def accepted(expect: list[str] | None) -> tuple[str, ...]:
    """ok plus the --expect statuses; an unknown one is a user error."""
    from ..errors import StbenchError
    from ..store.rows import STATUSES

    bad = [s for s in expect or () if s not in STATUSES]
    if bad:
        raise StbenchError(f"--expect {bad[0]!r} is not a status; valid: {', '.join(STATUSES[1:])}")
    return ("ok", *(expect or ()))


def exit_for(rows: list, ok: tuple[str, ...]) -> None:
    """Exit 1 when a cell ended with a status the study did not accept (a script sees the break)."""
    from ..store.rows import unexpected

    bad = unexpected(rows, ok)
    if bad:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(bad.items()))
        render.error(
            f"{sum(bad.values())} of {len(rows)} cells did not end ok ({counts}); "
            "--expect STATUS accepts a status the study looks for"
        )
        raise typer.Exit(1)


def warn_skips(plan) -> None:
    """One line for each reason cells of the plan cannot run here (a GPU it does not have)."""
    for reason in sorted(set(plan.skips.values())):
        render.warn(f"skipping cells: {reason}")


def run_with_progress(plan, env, timeout: float | None, stall: float | None = None) -> list:
    """Run a plan under a progress bar, naming the cells that cannot run here. Both start once
    the study's folder is ours, so a refused folder (another parent runs it) is one line."""
    from ..runner import study

    done = len(plan.finished & {c.run_id for c in plan.cells})
    with ExitStack() as stack:
        bar = {}

        def begin():
            warn_skips(plan)
            bar["start"], bar["done"] = stack.enter_context(
                render_run.progress(
                    len(plan.cells), done, render_run.varied_params(plan.cells), plan.folder
                )
            )

        return study.run_study(
            plan,
            env,
            timeout,
            stall=stall,
            on_begin=begin,
            on_start=lambda spec: bar["start"](spec),
            on_done=lambda spec, row: bar["done"](spec, row),
        )


@dataclass(frozen=True)
class RunRequest:
    """What `stbench run` was asked, typed (the raw option values Click passes through
    ctx.params once broke every `stbench run` on the H100): the studies (a WORKLOAD, --all, or
    the study --resume finishes) and how their cells run."""

    matrix: object  # plan.planner.Request: the matrix of a new study (its workload "" with --all)
    every: bool = False  # --all: a study of every registered workload
    resume: Path | None = None
    timeout: float | None = None
    stall: float | None = None
    budget: float | None = None  # wall seconds of the study, rounds added until conclusive
    dry_run: bool = False
    accept: tuple[str, ...] = ("ok",)
    stored: object = None  # plan.planner.Plan: the study --resume finishes, read by check()
    # when the command began (time.time()): a budget is the study's, its planning included
    started: float = field(default_factory=time.time)

    def check(self) -> RunRequest:
        """One of a WORKLOAD, --all or --resume FOLDER; positive seconds; else one line. The
        request checked, with the study --resume finishes read (`stored`)."""
        from ..errors import StbenchError, a_folder
        from ..plan import planner
        from ..plan.launcher_config import make_launch
        from ..plan.rounds import windows_refused, windows_window_s
        from ..plan.spec import expand

        named = bool(self.matrix.workload)
        if not (self.every or named or self.resume) or (self.every and (named or self.resume)):
            raise StbenchError(
                "stbench run needs one of: a WORKLOAD (see `stbench list`), --all (every "
                "workload), or --resume FOLDER to finish a study"
            )
        launch = make_launch(
            self.matrix.launcher,
            list(self.matrix.slurm),
            self.matrix.timeout,
            list(self.matrix.dask),
        )
        for flag, seconds in (
            ("--stall-limit", self.stall),
            ("--budget", self.budget),
            ("--timeout", self.timeout),
        ):
            if seconds is not None and not seconds > 0:
                raise StbenchError(f"{flag} {seconds:g} must be a positive number of seconds")
        if self.resume:
            stored = planner.stored_study(self.matrix.workload or None, self.resume, "run")
            return replace(self, stored=stored)
        for name in self.workloads():  # an unknown name lists the valid ones
            w, matrix = planner.check_new(replace(self.matrix, workload=name))
            cells = expand(matrix)
            # its data too, while the cells' server imports torch: a missing file or a store
            # without the variable is one line in ~1.5 s, not after the inventory (6 s here)
            planner.check_data(w, [c.params for c in cells])
            if self.budget and windows_refused(cells, launch.kind) is None:
                windows_window_s(cells, self.budget)  # a budget too small, likewise
        a_folder(self.matrix.out)
        return self

    def workloads(self) -> list[str]:
        """The workloads of its new studies: --all's every registered one, else the one named
        (none where it resumes a study)."""
        from ..plan import registry

        if self.resume:
            return []
        return [w.name for w in registry.all_workloads()] if self.every else [self.matrix.workload]


@app.command("run", short_help="Run a study: a matrix of cells, each a row.")
def run_command(
    workload: StudyWorkload = None,
    device: Devices = None,
    strategy: Strategies = None,
    nproc: Nprocs = None,
    nnodes: Nnodes = None,
    batch_size: Batches = None,
    epochs: Epochs = None,
    set_: Sets = None,
    preset: Preset = None,
    rounds: Rounds = 1,
    budget: Budget = None,
    smoke: Smoke = False,
    seed: Seed = 0,
    same_seed: SameSeed = False,
    all_: AllWorkloads = False,
    out: Out = Path("results"),
    resume: Resume = None,
    timeout: Timeout = None,
    stall_limit: StallLimit = None,
    launcher: Launcher = None,
    slurm: Slurm = None,
    dask: Dask = None,
    price: Price = None,
    expect: Expect = None,
    dry_run: DryRun = False,
) -> None:
    """Run a study: each cell of its matrix a process, its row in FOLDER/runs.csv.

    \b
      stbench run cnn-strain                                 # the default study
      stbench run lstm-era5 --device cpu cuda --epochs 5 10 15 --rounds 3
      stbench run stnn --set grid=30x84,60x168 --set relations=dense,sparse
      stbench run cnn-strain --strategy ddp --nproc 1 2 4 --budget 600
      stbench run --resume results/20261127-120000-host-stnn   # finish a study

    Every list option, and every --set with several values, is an axis of the matrix; the
    study ends with its finding and table (`stbench compare` shows it again)."""
    from ..runner import warm

    warm.start_server(workload)  # the cells' server imports torch while this process plans
    from ..plan import planner
    from ..runner import envinfo

    asked = RunRequest(
        planner.Request(
            workload or "",
            devices=tuple(device or ()),
            strategies=tuple(strategy or ()),
            nprocs=tuple(nproc or ()),
            batch_sizes=tuple(batch_size or ()),
            epochs=tuple(epochs or ()),
            sets=tuple(set_ or ()),
            repeat=rounds,
            preset=preset,
            smoke=smoke,
            seed=seed,
            seed_per_repeat=not same_seed,
            out=Path(out),
            nnodes=tuple(nnodes or ()),
            launcher=launcher or "local",
            slurm=tuple(slurm or ()),
            dask=tuple(dask or ()),
            timeout=timeout,
            prices=tuple(prices_given(price).items()),
        ),
        every=all_,
        resume=Path(resume) if resume else None,
        timeout=timeout,
        stall=stall_limit,
        budget=budget,
        dry_run=dry_run,
        accept=accepted(expect),
    ).check()  # before the inventory, which waits for the cells' server
    import_what_a_study_needs()
    plans = study_plans(asked, envinfo.inventory())
    if asked.dry_run:
        return dry(plans, asked.timeout)
    exit_for(run_studies(plans, asked), asked.accept)


def import_what_a_study_needs() -> None:
    """What a study's run and its answer import, imported now, while the cells' server imports
    torch on another core: the inventory waits for the server, and these imports left until
    after it cost ~0.3-0.4 s a command on the 2-core VM."""
    from ..report import model, view  # noqa: F401
    from ..runner import engine, study  # noqa: F401


def run_studies(plans, asked: RunRequest) -> list:
    """Each study under its progress bar, then its table and finding; every row. With --budget,
    round after round until it concludes or the budget is spent: as windows of warm processes
    where its cells can be (the questions' engine), else whole cells a round."""
    from ..plan.rounds import windows_refused
    from ..runner import envinfo, rounds
    from ..runner.engine import answer
    from ..store.manifest import RUN_KIND

    env = envinfo.inventory()
    rows, go = [], partial(run_with_progress, env=env, timeout=asked.timeout, stall=asked.stall)
    # the first study's budget counts from the command's start, its inventory and planning
    # included (`run --budget 30` ended 33 s after it was typed); each later study's from its own
    began = asked.started
    for plan in plans:
        question = plan.manifest.get("question") or {}
        with render.interrupted(partial(resume_line, plan, "stbench run")):
            if question.get("kind") == RUN_KIND:
                warn_skips(plan)
                deadline = began + (asked.budget or float(question["budget_s"]))
                with render_run.budget_progress(deadline - time.time(), plan.cells) as on_row:
                    done = answer(plan, env, deadline, render.note, on_row)
            elif asked.budget is None:
                done = go(plan)
            else:
                render.note(
                    "--budget: a process a cell, whole cells a round: "
                    f"{windows_refused(plan.cells, plan.launch.kind)}"
                )
                left = asked.budget - (time.time() - began)
                done = rounds.until_conclusive(plan, env, left, go, render.note)
        began = time.time()
        rows += done
        if done:  # a study with rows: its table and its finding
            print_study(plan.folder, done)
    return rows


def study_plans(asked: RunRequest, env) -> list:
    """The plan of the study --resume finishes, or a new study's per workload (--all: every
    registered one); with --budget, each as windows of warm processes where its cells can be
    (plan.rounds.run_as_windows)."""
    from ..plan import planner
    from ..plan.rounds import run_as_windows, windows_refused

    if asked.resume:
        return [planner.with_skips(asked.stored, env)]
    plans = [
        planner.plan_new(
            replace(asked.matrix, workload=name), env, tuple(sys.argv), data_checked=True
        )
        for name in asked.workloads()
    ]
    if asked.budget is None:
        return plans
    return [
        p
        if windows_refused(p.cells, p.launch.kind)
        else run_as_windows(p, asked.budget, asked.matrix.repeat)
        for p in plans
    ]


def resume_line(plan, command: str) -> str:
    """What an interrupted study has and how to finish it: one line."""
    from ..store.files import read_runs
    from ..store.manifest import read_manifest

    folder = plan.folder
    have = len(read_runs(folder)) if (folder / "runs.csv").exists() else 0
    # the folder's manifest: a question's engine adds each round's cells to it as they run
    cells = len(plan.cells)
    if (folder / "manifest.json").exists():
        cells = len(read_manifest(folder).get("cells") or ()) or cells
    return (
        f"{have} of {cells} cells have their row in {folder}; "
        f"finish it: {command} --resume {folder}"
    )


def print_study(folder: Path, runs: list) -> None:
    """A study's rows as compare reads them (its manifest's prices and question added): the
    table of its runs, then its finding and flags; a study of rounds (--budget: windows, or
    whole cells a round), its answer as compare prints it: a row a round was 12 lines for two
    configurations."""
    from ..report import read
    from ..report.model import studies
    from ..report.view import view

    if any(r.repeat for r in runs):
        render_run.print_answer(folder, runs)
        return
    (study,) = studies([read.folder_of(folder, runs)])
    render_run.run_summary(study, view(study), folder)
    if sum(r.status == "ok" for r in runs) > 1:  # cells to compare, on one run each
        render.note(
            f"One round: no interval. `stbench run --resume {folder} --budget SECONDS` adds "
            "rounds until each cell is told from the first or looks equal to it."
        )


def dry(plans, timeout: float | None) -> None:
    """--dry-run: what each cell would run (a resume prints only what is left)."""
    from ..runner import launchers

    for plan in plans:
        left = plan.remaining
        if not left.cells:
            render.out.print(
                f"nothing left to run: every cell of {plan.folder} has its row", markup=False
            )
            continue
        render.out.print(launchers.describe(left, timeout), markup=False, end="")


@app.command(short_help="Profile a few steps: phases, syncs, memory, a trace.")
def profile(
    workload: Workload,
    device: Devices = None,
    batch_size: Batches = None,
    set_: Sets = None,
    steps: Annotated[
        int, typer.Option(metavar="N", help="steady steps recorded after the warm-up")
    ] = 10,
    preset: Preset = None,
    smoke: Smoke = False,
    seed: Seed = 0,
    out: Out = Path("results"),
    timeout: Timeout = None,
    stall_limit: StallLimit = None,
    expect: Expect = None,
) -> None:
    """A short profiled run: what it found, its phase table, per-step memory, top operators,
    Chrome trace (stnn's offloaded relations: --set relations=offload)."""
    from ..runner import warm

    warm.start_server(workload)  # the cells' server imports torch while this process plans
    from ..plan import planner
    from ..report.profile import report
    from ..runner import envinfo

    request = planner.Request(
        workload,
        devices=tuple(device or ()),
        batch_sizes=tuple(batch_size or ()),
        sets=tuple(set_ or ()),
        preset=preset,
        smoke=smoke,
        seed=seed,
        out=out,
    )
    asked = RunRequest(
        planner.profile_request(request, steps),
        timeout=timeout,
        stall=stall_limit,
        accept=accepted(expect),
    ).check()
    import_what_a_study_needs()
    env = envinfo.inventory()
    plan = planner.plan_profile(asked.matrix, env, tuple(sys.argv))
    with render.interrupted(partial(resume_line, plan, "stbench run")):
        rows = run_with_progress(plan, env, timeout, stall_limit)
    whole, fitted = report(plan.folder, list(rows), render.table_width())
    (plan.folder / "profile.md").write_text(whole)
    render.out.print(fitted, markup=False)
    exit_for(rows, asked.accept)
