"""`stbench data prepare`: cache a selection of a workload's real data as a local store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import StbenchError
from . import render
from .app import app

data = typer.Typer(
    help="A workload's real data: `stbench data prepare WORKLOAD` caches a selection locally.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(data, name="data", short_help="Cache a selection of a workload's real data.")


@data.command(
    "prepare", short_help="Cache a selection as a local store that --set data=PATH reads."
)
def prepare_command(
    workload: Annotated[
        str,
        typer.Argument(metavar="WORKLOAD", help="a workload with data to prepare (`stbench list`)"),
    ],
    source: Annotated[
        str, typer.Option(metavar="SOURCE", help="arco, a gs:// URL, or a local .csv/.zarr/.nc")
    ] = "arco",
    points: Annotated[
        str, typer.Option(metavar="LAT:LON+...", help="points joined by '+'")
    ] = "40:280+20:280",
    grid: Annotated[
        str, typer.Option(metavar="LAT0:LAT1:LON0:LON1", help="a box instead of points")
    ] = "",
    start: Annotated[str, typer.Option(metavar="TIME", help="first hour")] = "2020-01-01",
    end: Annotated[str, typer.Option(metavar="TIME", help="last hour")] = "2021-12-31T23",
    store: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="the zarr store to write (default: in the cache)"),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="read the selection even above --max-gb")
    ] = False,
    max_gb: Annotated[
        float, typer.Option(metavar="GB", help="what it may fetch without --yes")
    ] = 1.0,
) -> None:
    """Cache a selection of a workload's real data as a local store that `stbench run WORKLOAD
    --set data=PATH` reads. It says first what the selection will read; interrupted, the same
    command resumes it."""
    from ..plan import registry
    from ..runner.study import prepare_data

    try:
        path = prepare_data(
            registry.get(workload),
            store,
            source=source,
            points=points,
            grid=grid,
            start=start,
            end=end,
            yes=yes,
            max_gb=max_gb,
            progress=lambda text: render.err.print(text, markup=False),
        )
    except ValueError as exc:
        raise StbenchError(str(exc)) from None
    except KeyboardInterrupt as exc:
        render.error("interrupted; the blocks copied so far are kept: the same command resumes")
        raise typer.Exit(render.exit_code(exc)) from None
    render.out.print(f"wrote {path}; use it with: stbench run {workload} --set data={path}")
