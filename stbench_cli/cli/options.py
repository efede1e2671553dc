"""Option types shared by the commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# Options that take several values after one flag (`--device cpu cuda`); see spread_lists.
LIST_OPTIONS = (
    "--device",
    "--strategy",
    "--nproc",
    "--batch-size",
    "--epochs",
    "--nnodes",
    "--expect",
    "--time-budget",
)

Workload = Annotated[str, typer.Argument(help="a workload from `stbench list`")]
StudyWorkload = Annotated[
    str | None, typer.Argument(help="a workload from `stbench list` (optional with --resume)")
]
Devices = Annotated[
    list[str] | None, typer.Option("--device", help="cpu, cuda, cuda:N (several: an axis)")
]
Strategies = Annotated[
    list[str] | None, typer.Option("--strategy", help="single, ddp, zero1, fsdp")
]
Nprocs = Annotated[
    list[int] | None, typer.Option("--nproc", help="processes per ddp/zero1/fsdp cell")
]
Batches = Annotated[list[int] | None, typer.Option("--batch-size", help="per-process batch sizes")]
Epochs = Annotated[list[int] | None, typer.Option("--epochs", help="epoch counts")]
Budgets = Annotated[
    list[float] | None,
    typer.Option(
        "--time-budget",
        help="seconds of training per cell instead of epochs (several: an axis); the same as "
        "--set time_budget=...",
    ),
]
StopAtTarget = Annotated[
    bool,
    typer.Option(
        "--stop-at-target",
        help="end each run at its first evaluation that reaches the target (--set target=...)",
    ),
]
Sets = Annotated[list[str] | None, typer.Option("--set", help="workload parameter axis: key=v1,v2")]
Preset = Annotated[str | None, typer.Option(help="named parameter set (see `stbench list`)")]
Repeats = Annotated[int, typer.Option("--repeat", help="repeats of every cell")]
AllWorkloads = Annotated[
    bool, typer.Option("--all", help="one study per registered workload (CI: --all --smoke)")
]
Smoke = Annotated[bool, typer.Option(help="shrink every cell to a seconds-long run")]
Out = Annotated[Path, typer.Option(help="parent folder of the new result folder")]
UntilConclusive = Annotated[
    float | None,
    typer.Option(
        "--until-conclusive",
        metavar="SECONDS",
        help="after the --repeat rounds, one round more at a time while a cell cannot be told "
        "from the first (paired by round), for at most SECONDS more",
    ),
]
Timeout = Annotated[float | None, typer.Option(help="seconds per cell before it is killed")]
StallLimit = Annotated[
    float | None,
    typer.Option(
        "--stall-limit",
        help="seconds a cell may make no progress (no step, no evaluation batch, "
        "no phase of its set-up) before it is killed as hung (default: 10 x "
        "its slowest step so far, at least 300 s)",
    ),
]
Nnodes = Annotated[
    list[int] | None,
    typer.Option(
        "--nnodes",
        help="nodes (torchrun agents) per multi-process cell; world size = nproc x nnodes",
    ),
]
Launcher = Annotated[
    str | None,
    typer.Option(
        help="local (this machine; N loopback agents for --nnodes N), "
        "slurm (a job per cell via submitit), srun (inside an allocation), "
        "dask (a rank per worker of a Dask cluster, see --dask), "
        "mpirun (this machine's ranks under Open MPI, for --set backend=mpi4py)"
    ),
]
Dask = Annotated[
    list[str] | None,
    typer.Option(
        "--dask",
        help="for --launcher dask: scheduler=ADDRESS, scheduler_file=PATH, or cluster="
        "local|slurm|pbs|lsf|sge|htcondor with that class's options (cores=4, memory=16GB, "
        "queue=...); none: Dask's own configuration (DASK_SCHEDULER_ADDRESS)",
    ),
]
Slurm = Annotated[
    list[str] | None,
    typer.Option(
        "--slurm",
        help="sbatch option for --launcher slurm: key=value "
        "(partition=gpu, account=..., cpus_per_task=8)",
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(help="print what each cell would run (sbatch scripts for slurm); write nothing"),
]
Expect = Annotated[
    list[str] | None,
    typer.Option(
        "--expect",
        help="statuses besides ok a study may end with and still exit 0 "
        "(e.g. oom for a batch sweep looking for the memory edge): "
        "skipped, oom, diverged, failed, timeout, hung",
    ),
]
Seed = Annotated[
    int,
    typer.Option(help="the first repeat's seed; repeat r trains with seed + r (see --same-seed)"),
]
SameSeed = Annotated[
    bool,
    typer.Option(
        "--same-seed",
        help="every repeat with --seed: the repeats then differ by the machine's noise only, "
        "not by the training's randomness (initial weights, data order, generated data)",
    ),
]
# issue 32: what a device-hour costs, for cost per million samples and cost to target
Price = Annotated[
    list[str] | None,
    typer.Option(
        "--price",
        help="USD per device-hour: DEVICE=PRICE (repeat, or a comma list: "
        "cpu=0.68,cuda=2.99; cuda prices every GPU, cuda:1 one); stored in the "
        "manifest",
    ),
]
PricesFile = Annotated[
    Path | None,
    typer.Option(
        "--prices", help="a .toml, .json (device = USD per hour) or .csv (device,usd_per_hour) file"
    ),
]
Resume = Annotated[
    Path | None,
    typer.Option(
        help="finish the study in this folder "
        "(its matrix is read from manifest.json; axes given here are ignored)"
    ),
]


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


def prices_given(price: list[str] | None, prices_file: Path | None) -> dict[str, float]:
    """--prices FILE, then each --price over it; a bad one is one StbenchError line (exit 2)."""
    from ..errors import StbenchError
    from ..store.prices import parse_price, read_prices

    try:
        out = read_prices(prices_file) if prices_file else {}
        for text in price or ():
            out.update(parse_price(text))
    except ValueError as exc:
        raise StbenchError(str(exc)) from None
    return out
