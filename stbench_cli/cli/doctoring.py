"""`stbench doctor`: checks the timing method on this machine; exit 1 if one fails."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path
from typing import Annotated

import typer

from ..device import is_cuda, parse
from ..errors import StbenchError
from . import render
from .app import app
from .options import Devices, Out


@app.command(short_help="Check the timing method on this machine.")
def doctor(
    device: Devices = None,
    out: Out = Path("results"),
    quick: Annotated[
        bool,
        typer.Option(
            help="under a minute: phase-timing, sampling, peaks and launches only; leaves out "
            "ddp-sync (a 2-rank torchrun world) and overhead (timed blocks)"
        ),
    ] = False,
) -> None:
    """Check phase timing, instrumentation overhead, DDP sync, sampling and peaks on this machine.
    Ctrl-C stops it with one line (exit 130), writing nothing."""
    from ..runner import warm

    render.out_folder(out)  # a file in its place: one line before any check runs
    warm.start_server()  # the checks' processes are forked from it, each sparing a torch import
    from ..plan.spec import check_device
    from ..runner import doctor as checks
    from ..runner import envinfo

    devices = [check_device(d) for d in device or ["cpu"]]
    names, done = checks.QUICK if quick else checks.CHECKS, []
    with render.interrupted(
        lambda: f"{len(done)} of {len(devices) * len(names)} checks ran; doctor.json not written"
    ):
        env = envinfo.inventory()
        for d in devices:  # torch's own count: NVML's inventory may be missing (containers, MIG)
            if is_cuda(d) and (parse(d).index or 0) >= env.gpu_count:
                raise StbenchError(f"--device {d}: no such GPU is visible ({env.gpu_count} GPU(s))")
        results = checks.run_checks(
            devices, env, on_done=lambda c: (done.append(c), render.check_line(c)), names=names
        )
    # a result folder of its own, as every command's --out has it
    folder = out / f"{dt.datetime.now():%Y%m%d-%H%M%S}-{socket.gethostname()}-doctor"
    path = checks.write_doctor(folder, results, env)
    render.checks_table(results, path)
    if any(c.status == "FAIL" for c in results):
        raise typer.Exit(1)
    if any(c.status == checks.UNSURE for c in results):  # too noisy to judge: not a pass
        raise typer.Exit(3)
