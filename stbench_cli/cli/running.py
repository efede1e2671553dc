"""`stbench run` and `stbench profile`: plan a study, run it under a progress bar, render."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from . import render, render_run
from .app import app
from .options import (
    AllWorkloads,
    Batches,
    Budgets,
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
    PricesFile,
    Repeats,
    Resume,
    SameSeed,
    Seed,
    Sets,
    Slurm,
    Smoke,
    StallLimit,
    StopAtTarget,
    Strategies,
    StudyWorkload,
    Timeout,
    UntilConclusive,
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


def exit_for(rows: list[dict], ok: tuple[str, ...]) -> None:
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


def run_with_progress(plan, env, timeout: float | None, stall: float | None = None) -> list[dict]:
    """Run a plan under a progress bar, naming the cells that cannot run here. Both start once
    the study's folder is ours, so a refused folder (another parent runs it) is one line."""
    from ..runner import study

    done = len(plan.finished & {c.run_id for c in plan.cells})
    with ExitStack() as stack:
        bar = {}

        def begin():
            for reason in sorted(set(plan.skips.values())):
                render.warn(f"skipping cells: {reason}")
            bar["start"], bar["done"] = stack.enter_context(
                render_run.progress(len(plan.cells), done)
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


@app.command()
def run(
    ctx: typer.Context,
    workload: StudyWorkload = None,
    device: Devices = None,
    strategy: Strategies = None,
    nproc: Nprocs = None,
    batch_size: Batches = None,
    epochs: Epochs = None,
    set_: Sets = None,
    repeat: Repeats = 1,
    preset: Preset = None,
    smoke: Smoke = False,
    seed: Seed = 0,
    same_seed: SameSeed = False,
    out: Out = Path("results"),
    resume: Resume = None,
    timeout: Timeout = None,
    nnodes: Nnodes = None,
    launcher: Launcher = None,
    slurm: Slurm = None,
    dask: Dask = None,
    dry_run: DryRun = False,
    expect: Expect = None,
    time_budget: Budgets = None,
    stop_at_target: StopAtTarget = False,
    stall_limit: StallLimit = None,
    all_: AllWorkloads = False,
    price: Price = None,
    prices: PricesFile = None,
    until_conclusive: UntilConclusive = None,
) -> None:
    """Run a matrix of devices x strategies x nproc x nnodes x batch sizes x epochs x --set axes."""
    from ..runner import warm

    warm.start()  # the cells' server imports torch while this process plans
    from ..runner import envinfo, rounds

    ok = accepted(expect)
    check_stall(stall_limit)
    rounds.check_budget(until_conclusive)
    check_target(ctx.params)  # before the inventory, which waits for the cells' server
    env = envinfo.inventory()
    plans = study_plans(ctx.params, env)
    if dry_run:
        return dry(plans, timeout)
    exit_for(run_studies(plans, env, timeout, stall_limit, until_conclusive), ok)


def run_studies(plans, env, timeout, stall, budget: float | None) -> list[dict]:
    """Each study under its progress bar (with --until-conclusive, round after round), then its
    table and finding; every row."""
    from ..runner import rounds

    rows, go = [], partial(run_with_progress, env=env, timeout=timeout, stall=stall)
    for plan in plans:
        with render.interrupted(partial(resume_line, plan, "stbench run")):
            done = (
                go(plan)
                if budget is None
                else rounds.until_conclusive(plan, env, budget, go, render.note)
            )
        rows += done
        if done:  # a study with rows: read back, its table and its finding
            summary(plan.folder)
    return rows


def study_plans(o: dict, env) -> list:
    """What `stbench run`'s options (`o`: its parameters by name) ask for: the plan of the study
    --resume finishes, or a new study's per workload (--all: every registered one)."""
    from ..plan import planner, registry

    workload, all_ = o["workload"], o["all_"]
    # Click's raw values: typer converts Path options for the callback's own arguments only
    resume = Path(o["resume"]) if o["resume"] else None
    check_target(o)
    if resume:
        return [planner.plan_resume(workload, resume, env)]
    common = dict(
        devices=tuple(o["device"] or ()),
        strategies=tuple(o["strategy"] or ()),
        nprocs=tuple(o["nproc"] or ()),
        batch_sizes=tuple(o["batch_size"] or ()),
        epochs=tuple(o["epochs"] or ()),
        sets=tuple(quality_sets(list(o["set_"] or ()), o["time_budget"], o["stop_at_target"])),
        repeat=o["repeat"],
        preset=o["preset"],
        smoke=o["smoke"],
        seed=o["seed"],
        seed_per_repeat=not o["same_seed"],
        out=Path(o["out"]),
        nnodes=tuple(o["nnodes"] or ()),
        launcher=o["launcher"] or "local",
        slurm=tuple(o["slurm"] or ()),
        dask=tuple(o.get("dask") or ()),
        timeout=o["timeout"],
        prices=tuple(prices_given(o["price"], Path(o["prices"]) if o["prices"] else None).items()),
    )
    names = [w.name for w in registry.all_workloads()] if all_ else [workload]
    return [
        planner.plan_new(planner.Request(name, **common), env, tuple(sys.argv)) for name in names
    ]


def resume_line(plan, command: str) -> str:
    """What an interrupted study has and how to finish it: one line."""
    from ..store.files import read_runs

    folder = plan.folder
    have = len(read_runs(folder)) if (folder / "runs.csv").exists() else 0
    return (
        f"{have} of {len(plan.cells)} cells have their row in {folder}; "
        f"finish it: {command} --resume {folder}"
    )


def check_target(o: dict) -> None:
    """One of a WORKLOAD, --all or --resume DIR, or a one-line error."""
    from ..errors import StbenchError

    workload, all_, resume = o["workload"], o["all_"], o["resume"]
    if not (all_ or workload or resume) or (all_ and (workload or resume)):
        raise StbenchError(
            "stbench run needs one of: a WORKLOAD (see `stbench list`), --all (every workload), "
            "or --resume DIR to finish a study"
        )


def summary(folder: Path) -> None:
    """A study's rows read back as compare reads them: the table of its runs, then its finding
    and flags."""
    from ..report import read
    from ..report.model import studies
    from ..report.view import view

    (study,) = studies([read.read_folder(folder, ())])
    render_run.run_summary(study, view(study), folder)


def check_stall(limit: float | None) -> None:
    from ..errors import StbenchError

    if limit is not None and not limit > 0:
        raise StbenchError(f"--stall-limit {limit:g} must be a positive number of seconds")


def quality_sets(sets: list[str], budgets: list[float] | None, stop_at_target: bool) -> list[str]:
    """--time-budget and --stop-at-target as the --set axes they are."""
    from ..errors import StbenchError

    named = {s.partition("=")[0].strip() for s in sets}
    for flag, key, given in (
        ("--time-budget", "time_budget", budgets),
        ("--stop-at-target", "stop_at_target", stop_at_target),
    ):
        if given and key in named:
            raise StbenchError(
                f"{flag} and --set {key}=... name the same parameter; give one of them"
            )
    for b in budgets or ():
        if not b > 0:
            raise StbenchError(f"--time-budget {b:g} must be a positive number of seconds")
    if budgets:
        sets.append("time_budget=" + ",".join(f"{b:g}" for b in budgets))
    if stop_at_target:
        sets.append("stop_at_target=true")
    return sets


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


@app.command()
def profile(
    workload: Workload,
    device: Devices = None,
    batch_size: Batches = None,
    set_: Sets = None,
    offload: Annotated[bool, typer.Option(help="the same as --set relations=offload")] = False,
    steps: Annotated[int, typer.Option(help="steady steps recorded after the warm-up")] = 10,
    preset: Preset = None,
    smoke: Smoke = False,
    seed: int = 0,
    out: Out = Path("results"),
    timeout: Timeout = None,
    expect: Expect = None,
    stall_limit: StallLimit = None,
) -> None:
    """A short profiled run: what it found, its phase table, per-step memory, top operators,
    Chrome trace."""
    from ..runner import warm

    warm.start()  # the cells' server imports torch while this process plans
    from ..plan import planner
    from ..report.profile import report
    from ..report.read import read_folder
    from ..runner import envinfo

    ok = accepted(expect)
    check_stall(stall_limit)
    env = envinfo.inventory()
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
    plan = planner.plan_profile(request, env, offload, steps, tuple(sys.argv))
    with render.interrupted(partial(resume_line, plan, "stbench run")):
        rows = run_with_progress(plan, env, timeout, stall_limit)
    runs = read_folder(plan.folder, ()).runs if rows else ()
    text = report(plan.folder, list(runs))
    (plan.folder / "profile.md").write_text(text)
    render.out.print(text, markup=False)
    exit_for(rows, ok)
