"""`stbench data`: prepare a workload's real data as a local store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import StbenchError
from . import render
from .app import app


@app.command()
def data(
    workload: Annotated[
        str, typer.Argument(help="a workload with preparable data (see `stbench list`)")
    ],
    prepare: Annotated[
        bool, typer.Option(help="fetch/convert a selection into a local zarr store")
    ] = False,
    source: Annotated[
        str, typer.Option(help="arco, a gs:// URL, or a local .csv/.zarr/.nc")
    ] = "arco",
    points: Annotated[str, typer.Option(help="lat:lon points joined by '+'")] = "40:280+20:280",
    grid: Annotated[str, typer.Option(help="lat0:lat1:lon0:lon1 box instead of points")] = "",
    start: str = "2020-01-01",
    end: str = "2021-12-31T23",
    out: Annotated[
        Path | None, typer.Option(help="the zarr store to write (default: in the stbench cache)")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="read the selection even above --max-gb")
    ] = False,
    max_gb: Annotated[float, typer.Option(help="GB a prepare may fetch without --yes")] = 1.0,
) -> None:
    """Prepare a workload's data: cache a selection as a local store that `--set data=PATH` reads.
    It says first what the selection will read; interrupted, the same command resumes it."""
    from ..plan import registry
    from ..runner.study import prepare_data

    if not prepare:
        raise StbenchError("nothing to do: add --prepare (and --source/--start/--end)")
    try:
        path = prepare_data(
            registry.get(workload),
            out,
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
    except KeyboardInterrupt:
        render.error("interrupted; the blocks copied so far are kept: the same command resumes")
        raise typer.Exit(130) from None
    render.out.print(f"wrote {path}; use it with: stbench run {workload} --set data={path}")
