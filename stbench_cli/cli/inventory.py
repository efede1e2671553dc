"""`stbench list` and `stbench env`: what this stbench and this machine have."""

from __future__ import annotations

from typing import Annotated

import typer

from . import render
from .app import app


@app.command("list", short_help="Workloads; one workload's parameters and presets.")
def list_cmd(
    workload: Annotated[
        str | None,
        typer.Argument(metavar="WORKLOAD", help="show this workload's parameters and presets"),
    ] = None,
) -> None:
    """Workloads, one a line; with a name, its parameters, presets, strategies and data."""
    from ..plan import registry

    if workload:
        render.workload_detail(registry.get(workload))
    else:
        render.workloads_table(registry.all_workloads())


@app.command(short_help="This machine: hardware, software, measured peaks.")
def env(refresh: Annotated[bool, typer.Option(help="measure the peaks again")] = False) -> None:
    """Hardware and software inventory, with measured fp32 matmul and copy peaks (cached)."""
    from ..runner import envinfo

    info = envinfo.collect()
    devices = ["cpu"] + [f"cuda:{i}" for i in range(info.gpu_count)]
    render.env_report(info, envinfo.peaks(info, devices, refresh))
