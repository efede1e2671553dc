"""The `stbench` command line: parse, call the engine, render. Nothing else lives here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import render
from .errors import StbenchError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Honest GPU-vs-CPU and multi-device scaling benchmarks for spatio-temporal training.")

# Options that take several values after one flag (`--device cpu cuda`); see spread_lists.
LIST_OPTIONS = ("--device", "--strategy", "--nproc", "--batch-size", "--epochs")

Devices = Annotated[Optional[list[str]], typer.Option("--device", help="cpu, cuda, cuda:N (several: an axis)")]
Strategies = Annotated[Optional[list[str]], typer.Option("--strategy", help="single, ddp")]
Nprocs = Annotated[Optional[list[int]], typer.Option("--nproc", help="processes per ddp cell")]
Batches = Annotated[Optional[list[int]], typer.Option("--batch-size", help="per-process batch sizes")]
Epochs = Annotated[Optional[list[int]], typer.Option("--epochs", help="epoch counts")]
Sets = Annotated[Optional[list[str]], typer.Option("--set", help="workload parameter axis: key=v1,v2")]
Preset = Annotated[Optional[str], typer.Option(help="named parameter set (see `stbench list`)")]
Smoke = Annotated[bool, typer.Option(help="shrink every cell to a seconds-long run")]
Out = Annotated[Path, typer.Option(help="parent folder of the new result folder")]
Timeout = Annotated[Optional[float], typer.Option(help="seconds per cell before it is killed")]


def spread_lists(argv: list[str]) -> list[str]:
    """Let a list option take several values: `--device cpu cuda` -> `--device cpu --device cuda`.

    Click options take one value each; researchers type the matrix the way they think of it.
    """
    out, current = [], None
    for tok in argv:
        if tok.startswith("-"):
            name = tok.split("=", 1)[0]
            current = name if name in LIST_OPTIONS and "=" not in tok else None
            out.append(tok)
        elif current and out[-1] != current:
            out.extend([current, tok])
        else:
            out.append(tok)
    return out


@app.command("list")
def list_cmd() -> None:
    """Workloads with their parameters, presets, strategies and data sources."""
    import workloads

    render.workloads_table([workloads.get(n) for n in workloads.names()])


@app.command()
def env(refresh: Annotated[bool, typer.Option(help="measure the peaks again")] = False) -> None:
    """Hardware and software inventory, with measured fp32 matmul and copy peaks (cached)."""
    from . import envinfo

    info = envinfo.collect()
    devices = ["cpu"] + [f"cuda:{i}" for i in range(info.gpu_count)]
    render.env_report(info, envinfo.peaks(info, devices, refresh))


@app.command()
def run(
    workload: Annotated[str, typer.Argument(help="a workload from `stbench list`")],
    device: Devices = None, strategy: Strategies = None, nproc: Nprocs = None,
    batch_size: Batches = None, epochs: Epochs = None, set_: Sets = None,
    repeat: Annotated[int, typer.Option(help="repeats of every cell")] = 1,
    preset: Preset = None, smoke: Smoke = False, seed: int = 0, out: Out = Path("results"),
    resume: Annotated[Optional[Path], typer.Option(help="finish the study in this folder (its matrix is read from manifest.json; axes given here are ignored)")] = None,
    timeout: Timeout = None,
) -> None:
    """Run a matrix of devices x strategies x nproc x batch sizes x epochs x --set axes."""
    from . import engine

    if resume:
        plan = engine.plan_resume(workload, resume)
    else:
        plan = engine.plan_new(workload, devices=device, strategies=strategy, nprocs=nproc, batch_sizes=batch_size,
                               epochs=epochs, sets=set_, repeat=repeat, preset=preset, smoke=smoke, seed=seed, out=out)
    rows = engine.execute(plan, timeout, render.progress, render.warn)
    render.run_summary(rows, plan.folder)


@app.command()
def profile(
    workload: Annotated[str, typer.Argument(help="a workload from `stbench list`")],
    device: Devices = None, batch_size: Batches = None, set_: Sets = None,
    offload: Annotated[bool, typer.Option(help="the same as --set relations=offload")] = False,
    steps: Annotated[int, typer.Option(help="steady steps recorded after the warm-up")] = 10,
    preset: Preset = None, smoke: Smoke = False, seed: int = 0, out: Out = Path("results"), timeout: Timeout = None,
) -> None:
    """A short profiled run: phase table, per-step memory, top operators, Chrome trace."""
    from . import engine

    plan = engine.plan_profile(workload, devices=device, batch_sizes=batch_size, sets=set_, offload=offload,
                               steps=steps, preset=preset, smoke=smoke, seed=seed, out=out)
    engine.execute(plan, timeout, render.progress, render.warn, profile=True)
    render.out.print(engine.profile_report(plan), markup=False)


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
    from . import compare as cmp

    text = cmp.run(paths, rows=rows, cols=cols, metric=metric, baseline=baseline, out=out, plot=plot)
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
    from . import engine

    if not prepare:
        raise StbenchError("nothing to do: add --prepare (and --source/--start/--end)")
    path = engine.prepare_data(workload, source=source, points=points, grid=grid, start=start, end=end, out=out)
    render.out.print(f"wrote {path}; use it with: stbench run {workload} --set data={path}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: one clear line and exit 2 for any user error."""
    command = typer.main.get_command(app)
    try:
        command.main(args=spread_lists(sys.argv[1:] if argv is None else argv), prog_name="stbench",
                     standalone_mode=True)
    except StbenchError as exc:
        render.error(str(exc))
        sys.exit(2)
