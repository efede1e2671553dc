"""The `stbench` commands: parse, call the planner and the runner, render. Nothing else."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import StbenchError
from . import render
from .options import Batches, Devices, Epochs, Nprocs, Out, Preset, Resume, Sets, Smoke, Strategies, Timeout, Workload

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Honest GPU-vs-CPU and multi-device scaling benchmarks for spatio-temporal training.")


@app.command("list")
def list_cmd() -> None:
    """Workloads with their parameters, presets, strategies and data sources."""
    from ..plan import registry

    render.workloads_table(registry.all_workloads())


@app.command()
def env(refresh: Annotated[bool, typer.Option(help="measure the peaks again")] = False) -> None:
    """Hardware and software inventory, with measured fp32 matmul and copy peaks (cached)."""
    from ..runner import envinfo

    info = envinfo.collect()
    devices = ["cpu"] + [f"cuda:{i}" for i in range(info.gpu_count)]
    render.env_report(info, envinfo.peaks(info, devices, refresh))


def execute(plan, env, timeout: float | None, extra: tuple[str, ...] = ()) -> list[dict]:
    """Run a plan under a progress bar, naming the cells that cannot run here."""
    from ..runner import study

    for reason in sorted(set(plan.skips.values())):
        render.warn(f"skipping cells: {reason}")
    done = len({r["run_id"] for r in plan.done} & {c.run_id for c in plan.cells})
    with render.progress(len(plan.cells), done) as (on_start, on_done):
        return study.execute(plan, env, timeout, extra_args=extra, on_start=on_start, on_done=on_done)


@app.command()
def run(
    workload: Workload, device: Devices = None, strategy: Strategies = None, nproc: Nprocs = None,
    batch_size: Batches = None, epochs: Epochs = None, set_: Sets = None,
    repeat: Annotated[int, typer.Option(help="repeats of every cell")] = 1,
    preset: Preset = None, smoke: Smoke = False, seed: int = 0, out: Out = Path("results"),
    resume: Resume = None, timeout: Timeout = None,
) -> None:
    """Run a matrix of devices x strategies x nproc x batch sizes x epochs x --set axes."""
    from ..plan import planner
    from ..runner import envinfo

    env = envinfo.collect()
    if resume:
        plan = planner.plan_resume(workload, resume, env)
    else:
        request = planner.Request(
            workload, devices=tuple(device or ()), strategies=tuple(strategy or ()), nprocs=tuple(nproc or ()),
            batch_sizes=tuple(batch_size or ()), epochs=tuple(epochs or ()), sets=tuple(set_ or ()),
            repeat=repeat, preset=preset, smoke=smoke, seed=seed, out=out)
        plan = planner.plan_new(request, env, tuple(sys.argv))
    render.run_summary(execute(plan, env, timeout), plan.folder)


@app.command()
def profile(
    workload: Workload, device: Devices = None, batch_size: Batches = None, set_: Sets = None,
    offload: Annotated[bool, typer.Option(help="the same as --set relations=offload")] = False,
    steps: Annotated[int, typer.Option(help="steady steps recorded after the warm-up")] = 10,
    preset: Preset = None, smoke: Smoke = False, seed: int = 0, out: Out = Path("results"), timeout: Timeout = None,
) -> None:
    """A short profiled run: phase table, per-step memory, top operators, Chrome trace."""
    from ..plan import planner
    from ..report.profile import report
    from ..runner import envinfo

    env = envinfo.collect()
    request = planner.Request(workload, devices=tuple(device or ()), batch_sizes=tuple(batch_size or ()),
                              sets=tuple(set_ or ()), preset=preset, smoke=smoke, seed=seed, out=out)
    plan = planner.plan_profile(request, env, offload, steps, tuple(sys.argv))
    rows = execute(plan, env, timeout, ("--profile", str((plan.folder / "profile").resolve())))
    text = report(plan.folder, rows)
    (plan.folder / "profile.md").write_text(text)
    render.out.print(text, markup=False)


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
    from ..store.files import find_folders, read_runs

    records = [r for folder in find_folders(paths) for r in read_runs(folder)]
    text = build(records, row_axis=rows, cols=cols, metric=metric, baseline=baseline, out=out, plot=plot)
    render.out.print(text, markup=False, end="")


@app.command()
def data(
    workload: Annotated[str, typer.Argument(help="a workload with preparable data (see `stbench list`)")],
    prepare: Annotated[bool, typer.Option(help="fetch/convert a selection into a local zarr store")] = False,
    source: Annotated[str, typer.Option(help="arco, a gs:// URL, or a local .csv/.zarr/.nc")] = "arco",
    points: Annotated[str, typer.Option(help="lat:lon points joined by '+'")] = "40:280+20:280",
    grid: Annotated[str, typer.Option(help="lat0:lat1:lon0:lon1 box instead of points")] = "",
    start: str = "2020-01-01",
    end: str = "2021-12-31T23",
    out: Annotated[Optional[Path], typer.Option(help="the zarr store to write (default: in the stbench cache)")] = None,
) -> None:
    """Prepare a workload's data: cache a selection as a local store that `--set data=PATH` reads."""
    from ..plan import registry
    from ..runner.study import prepare_data

    if not prepare:
        raise StbenchError("nothing to do: add --prepare (and --source/--start/--end)")
    try:
        path = prepare_data(registry.get(workload), out, source=source, points=points, grid=grid, start=start, end=end)
    except ValueError as exc:
        raise StbenchError(str(exc)) from None
    render.out.print(f"wrote {path}; use it with: stbench run {workload} --set data={path}")
