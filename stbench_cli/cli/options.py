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
    "--sizes",
)

Workload = Annotated[str, typer.Argument(metavar="WORKLOAD", help="a workload (`stbench list`)")]
StudyWorkload = Annotated[
    str | None,
    typer.Argument(metavar="WORKLOAD", help="a workload (`stbench list`); none with --resume"),
]
Devices = Annotated[
    list[str] | None,
    typer.Option("--device", metavar="DEVICE...", help="cpu, cuda, cuda:N (several: an axis)"),
]
Strategies = Annotated[
    list[str] | None,
    typer.Option("--strategy", metavar="NAME...", help="single, ddp, zero1, fsdp"),
]
Nprocs = Annotated[
    list[int] | None,
    typer.Option("--nproc", metavar="N...", help="processes per node of a ddp/zero1/fsdp cell"),
]
Batches = Annotated[
    list[int] | None, typer.Option("--batch-size", metavar="N...", help="per-process batches")
]
Epochs = Annotated[list[int] | None, typer.Option("--epochs", metavar="N...", help="epochs")]
Sets = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="KEY=V1,V2", help="a parameter (`stbench list WORKLOAD`); several: an axis"
    ),
]
# tune and gpu-vs-cpu choose their own configurations: a --set there fixes one value
FixedSets = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="a parameter fixed in every cell (`stbench list WORKLOAD`): one value each",
    ),
]
Preset = Annotated[
    str | None, typer.Option(metavar="NAME", help="a workload's preset (`stbench list WORKLOAD`)")
]
Rounds = Annotated[int, typer.Option("--rounds", metavar="N", help="rounds of every cell")]
AllWorkloads = Annotated[bool, typer.Option("--all", help="a study of every workload")]
Smoke = Annotated[bool, typer.Option("--smoke", help="every cell a seconds-long run")]
# --out means one thing in every command: the folder its new files go into, made if missing
OUT_HELP = "the folder this command's new files go into (made if missing)"
Out = Annotated[Path, typer.Option(metavar="FOLDER", help=OUT_HELP, show_default=True)]
# The time limits, one meaning each (docs/running.md "Time limits"): --budget the wall seconds a
# whole study may take, --timeout and --stall-limit a cell's, --window a cell's seconds of timed
# training (the parameter time_budget).
Budget = Annotated[
    float | None,
    typer.Option(
        "--budget",
        metavar="SECONDS",
        help="wall seconds for the whole study: paired rounds (windows of warm processes "
        "where the cells allow) while a cell cannot yet be told from the first",
    ),
]
Timeout = Annotated[
    float | None, typer.Option(metavar="SECONDS", help="a cell running longer is killed")
]
StallLimit = Annotated[
    float | None,
    typer.Option(
        "--stall-limit",
        metavar="SECONDS",
        help="a cell making no progress this long is killed as hung (default: 10 x its slowest "
        "step, at least 300 s)",
    ),
]
Nnodes = Annotated[
    list[int] | None,
    typer.Option("--nnodes", metavar="N...", help="nodes of a multi-process cell"),
]
Launcher = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="local (default), slurm (submitit), srun (in an allocation), dask (see --dask), "
        "mpirun (Open MPI)",
    ),
]
Dask = Annotated[
    list[str] | None,
    typer.Option(
        "--dask",
        metavar="KEY=VALUE",
        help="scheduler=ADDRESS, scheduler_file=PATH or cluster=local|slurm|pbs|... with its "
        "options (docs/cluster.md); none: Dask's configuration",
    ),
]
Slurm = Annotated[
    list[str] | None,
    typer.Option(
        "--slurm", metavar="KEY=VALUE", help="an sbatch option for --launcher slurm (partition=gpu)"
    ),
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="print each cell's command; run nothing")]
Expect = Annotated[
    list[str] | None,
    typer.Option(
        "--expect",
        metavar="STATUS...",
        help="statuses besides ok that still exit 0 (oom for a batch sweep)",
    ),
]
Seed = Annotated[int, typer.Option(metavar="N", help="round r trains with seed + r")]
SameSeed = Annotated[bool, typer.Option("--same-seed", help="every round with --seed")]
# what a device-hour costs, for cost per million samples and cost to target
Price = Annotated[
    list[str] | None,
    typer.Option(
        "--price",
        metavar="DEVICE=USD|FILE",
        help="USD per device-hour (cpu=0.68,cuda=2.99), or a .toml/.json/.csv file of them",
    ),
]
Resume = Annotated[
    Path | None,
    typer.Option(metavar="FOLDER", help="finish the study in this folder (its own options)"),
]


# Where a command takes one value of an option that is an axis elsewhere (`run --batch-size 64
# 128` is two cells), what the one value is: several are refused in one line, never the last kept.
ONE_VALUE = {
    ("tune", "--batch-size"): "the reference batch (half and twice it are tried)",
    ("gpu-vs-cpu", "--device"): "the GPU held against the CPU",
}
# Options renamed so that one concept has one name in every command: the old name is one line
# naming the new one, never silently taken.
RENAMED = {("run", "--repeat"): "--rounds", ("gpu-vs-cpu", "--gpu"): "--device"}


def spread_lists(argv: list[str]) -> list[str]:
    """Let a list option take several values: `--device cpu cuda` -> `--device cpu --device cuda`.

    Click options take one value each; researchers type the matrix the way they think of it.
    A command that takes one value of such an option gets one (ONE_VALUE), else one line.
    """
    command = next((tok for tok in argv if not tok.startswith("-")), "")
    out, current, given = [], None, []
    for tok in argv:
        if tok.startswith("-"):
            name = tok.split("=", 1)[0]
            if (command, name) in RENAMED:
                from ..errors import StbenchError

                raise StbenchError(
                    f"{name} is now {RENAMED[command, name]} (stbench {command} "
                    f"{RENAMED[command, name]} ...)"
                )
            current = name if name in LIST_OPTIONS and "=" not in tok else None
            given = []
            out.append(tok)
        elif current:
            given.append(tok)
            if (command, current) in ONE_VALUE and len(given) > 1:
                from ..errors import StbenchError

                raise StbenchError(
                    f"{current} {' '.join(given)}: stbench {command} takes one value, "
                    f"{ONE_VALUE[command, current]}"
                )
            out.extend([current, tok] if len(given) > 1 else [tok])
        else:
            out.append(tok)
    return out


def prices_given(given: list[str] | None) -> dict[str, float]:
    """Each --price in order, a file's or a DEVICE=USD's, later over earlier; a bad one is one
    StbenchError line (exit 2)."""
    from ..errors import StbenchError
    from ..store.prices import parse_price, read_prices

    out: dict[str, float] = {}
    try:
        for text in given or ():
            out.update(parse_price(text) if "=" in text else read_prices(Path(text)))
    except ValueError as exc:
        raise StbenchError(str(exc)) from None
    return out
