"""`python -m benchmarks.acceptance`: the GPU acceptance's command line (docs/gpu-acceptance.md).

    python -m benchmarks.acceptance --list
    python -m benchmarks.acceptance --out OUT [--deadline S] [--extra NAME] [STEP ...]
    python -m benchmarks.acceptance --rehearsal --out OUT [STEP ...]   (CUDA faked: tests/fakecuda)
    python -m benchmarks.acceptance --cpu-reference                     (rewrite cpu_reference.json)

On the GPU machine `benchmarks/gpu_acceptance.py` installs stbench from a wheel and runs this.
Exit 0 when every step and check passed (or is UNTESTED), 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import engine, execute, reference
from .state import State
from .steps import CORRECTNESS, EXTRAS, REFERENCE, STEPS
from .studies import STUDIES

DEFAULT = (*STEPS, *STUDIES)  # in priority order: correctness, then the reference studies
# A later command's deadline from the device time the session has left (the device tool's
# `status`: budget_left_s): less a cold machine's start, which counts against it (1-2 minutes:
# the longer), and the seconds the reply and the files take to come back.
COLD_START_S = 120
RETURN_S = 30
LEASE_S = 900  # a session's device time (the device tool's README)
FRESH_MACHINE_S = 240  # no machine starts with less left
INSTALL_S = 15
# from the command's start: the install and the caps (485 s), so that after a cold start and
# this command a second machine can still start for a step run again (a warm machine, called
# within 30 s of the reply, needs no start: the H200 run's three later commands did so)
DEADLINE_S = LEASE_S - COLD_START_S - RETURN_S - FRESH_MACHINE_S - 10


def deadline_for(device_left_s: float, warm: bool) -> float:
    """Seconds from a later command's start to end by, given the device time left."""
    return device_left_s - (0 if warm else COLD_START_S) - RETURN_S


REHEARSAL_SLACK = 3  # a rehearsal's cuda cells stop at once, its CPU cells run on 2 busy cores


def listing() -> str:
    """The parts and their steps with their caps, the default run's total, then the extras."""
    lines = []
    for part in (CORRECTNESS, REFERENCE):
        steps = [s for s in DEFAULT if s.part == part]
        lines.append(f"{part} (caps {sum(s.cap_s for s in steps)} s)")
        lines += [f"  {s.name:<26}{s.cap_s:>4} s  {s.what}" for s in steps]
    total = sum(s.cap_s for s in DEFAULT)
    lines.append(f"{'all':<28}{total:>4} s  caps on one H100 or H200, checks included")
    lines.append("extras (only with --extra NAME)")
    lines += [f"  {s.name:<26}{s.cap_s:>4} s  {s.what}" for s in EXTRAS]
    return "\n".join(lines)


def refuse(message: str) -> None:
    """A usage error: one line, exit 2, nothing written."""
    print(f"acceptance: {message}", file=sys.stderr)
    sys.exit(2)


def select(names: list[str], extras: list[str]) -> list:
    """The steps to run, in registry order; an unknown name is a usage error naming the valid."""
    known = {s.name: s for s in (*DEFAULT, *EXTRAS)}
    bad = [n for n in [*names, *extras] if n not in known]
    if bad:
        refuse(f"unknown step '{bad[0]}'; valid: {', '.join(known)}")
    chosen = set(names) | set(extras) if names else {s.name for s in DEFAULT} | set(extras)
    return [s for s in (*DEFAULT, *EXTRAS) if s.name in chosen]


def gpu_tag(names: str) -> str:
    """The GPU's short name for a result folder: 'NVIDIA H100 80GB HBM3' -> 'h100'."""
    found = re.search(r"\b([A-Z]{1,2}\d{1,4}[A-Za-z]?)\b", names)
    return found.group(1).lower() if found else "gpu"


def header(env, rehearsal: bool, deadline_s: float) -> dict:
    from stbench.plan.planner import git_sha
    from stbench.store.machine import gpu_names

    gpus = gpu_names(env.gpus) or "no GPU named"
    return {
        "machine": f"{gpus}; {env.cpu_model}, {env.cores_logical} cores, {env.ram_gb} GB; "
        f"host {env.host}",
        "software": f"torch {env.torch} CUDA {env.cuda}, Python {platform.python_version()}, "
        f"stbench {git_sha() or 'from its wheel'}",
        "started": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "deadline_s": deadline_s,
        "rehearsal": rehearsal,
        "gpu": gpu_tag(gpus),
        "note": "every verdict below was written when its step ended",
    }


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.acceptance", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("steps", nargs="*", help="only these steps (default: all of --list)")
    p.add_argument("--list", action="store_true", help="the steps, their caps and the total")
    p.add_argument("--out", type=Path, help="summary.md, state.json, run.log, results.tar.gz")
    p.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE_S,
        help="seconds from the command's start to end by (x3 in a rehearsal)",
    )
    p.add_argument(
        "--device-left",
        type=float,
        default=None,
        metavar="S",
        help="the device time left (status's budget_left_s): the deadline is computed from it "
        "(less a cold start unless --warm, and the return)",
    )
    p.add_argument("--warm", action="store_true", help="with --device-left: the machine is warm")
    p.add_argument("--started-at", type=float, default=None, help="the start, as time.time()")
    extras = ", ".join(s.name for s in EXTRAS)
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME",
        help=f"add an optional step (once each): {extras}",
    )
    p.add_argument("--rehearsal", action="store_true", help="CUDA faked: the rehearsal's verdicts")
    p.add_argument("--cpu-reference", action="store_true", help="rewrite the carried CPU rows")
    args = p.parse_args(argv)
    if args.device_left is not None:
        args.deadline = deadline_for(args.device_left, args.warm)
        if args.deadline <= 0:
            p.error(f"--device-left {args.device_left:.0f}: no time for a command after the start")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.list:
        print(listing())
        return 0
    if args.cpu_reference:
        smokes = [s for s in STEPS if s.cpu_argv]
        print(f"wrote {reference.make(smokes, lambda a: execute.stbench(a, 900))}")
        return 0
    steps = select(args.steps, args.extra)
    if args.out is None:
        refuse(
            "--out OUT is needed (the folder for summary.md, state.json, run.log, results.tar.gz)"
        )
    return run(steps, args)


def run(steps: list, args: argparse.Namespace) -> int:
    from stbench.device import device_count
    from stbench.runner import envinfo, warm

    warm.start_server()  # every step's single-process cells are forked from it (runner/warm.py)
    if not device_count():
        refuse("needs a CUDA GPU, and this torch sees none (torch.cuda.device_count() is 0)")
    args.out.mkdir(parents=True, exist_ok=True)
    slack = REHEARSAL_SLACK if args.rehearsal else 1
    state = State.load(args.out)
    state.header = header(envinfo.inventory(), args.rehearsal, args.deadline * slack)
    names = [s.name for s in (*DEFAULT, *EXTRAS) if s in steps or s.name in state.records]
    work = Path(tempfile.mkdtemp(prefix="stbench-acceptance-"))
    started = args.started_at or time.time()
    deadline_at = started + args.deadline * slack
    settings = engine.Settings(
        args.out.resolve(), work, deadline_at, args.rehearsal, slack, state.header["gpu"]
    )
    try:
        return engine.run(steps, settings, state, names)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
