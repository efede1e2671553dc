"""`--launcher local`: the cell's processes on this machine.

One node: a plain process (`single`) or a `torchrun --standalone` world. `--nnodes N > 1`: N
torchrun agents side by side, one per emulated node, meeting over loopback through torchrun's
static rendezvous (127.0.0.1, a free port, gloo on `lo`). They run as one process group, watched
together: the first agent to fail ends the others within seconds (as `srun --kill-on-bad-exit`
does), and `--timeout`, the stall watchdog or Ctrl-C kills all of them. It is how a multi-node
study is tested without a cluster.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from dataclasses import replace

from ...device import is_cuda, visible_devices
from ...plan.planner import Plan
from ...plan.spec import RunSpec
from ...store.cell_result import CellResult
from .. import hostprep, warm
from ..processes import CellJob, Outcome, label, run_processes
from . import torchrun


def loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_env(spec: RunSpec, node_rank: int, base: dict[str, str]) -> dict[str, str]:
    """The environment of emulated node `node_rank`: gloo on loopback; one thread per rank when
    several ranks share this machine (torchrun's own rule for one node, applied to all agents
    together); with NCCL, each agent sees only its own GPUs, as a real node would: the next
    nproc_per_node of those this machine shows (a CUDA_VISIBLE_DEVICES the user set included)."""
    env = dict(base, GLOO_SOCKET_IFNAME="lo")
    if spec.world_size > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    if is_cuda(spec.device) and spec.backend == "nccl":
        env["CUDA_VISIBLE_DEVICES"] = visible_devices(
            node_rank * spec.nproc_per_node, spec.nproc_per_node, base
        )
    return env


def commands(
    spec: RunSpec,
    cell: list[str],
    python: str = sys.executable,
    port: int = 29500,
    base: dict[str, str] | None = None,
) -> list[tuple[list[str], dict[str, str]]]:
    """(argv, environment) of each process the cell starts here."""
    base = dict(os.environ if base is None else base, PYTHONUNBUFFERED="1")
    if not spec.distributed:
        return [(torchrun.single_process(python, cell), base)]
    if spec.nodes == 1:
        return [(torchrun.standalone(spec, python, cell), base)]
    return [
        (torchrun.node(spec, python, cell, i, "127.0.0.1", port), node_env(spec, i, base))
        for i in range(spec.nodes)
    ]


def check(plan: Plan) -> None:
    """Nothing to check: this machine is always there."""


def run_cell(cell: CellJob) -> Outcome:
    cell.prepare()
    args = torchrun.cell_args(cell.spec_path, cell.result_path, cell.child_args)
    started = commands(cell.spec, args, port=loopback_port())
    role = "agent" if cell.spec.distributed else "cell"  # process i: node i's torchrun agent
    # the load check, threads, preloaded allocator and numactl
    prep = hostprep.prepare_host(cell.spec)
    if prep.failure:
        return Outcome(CellResult("skipped", prep.failure), others_before=prep.others_cores)
    argvs = [[*prep.prefix, *argv] for argv, _ in started]
    envs = [{**env, **prep.env} for _, env in started]
    fork = not cell.spec.distributed and not prep.prefix and warm.fits(envs[0])
    forked = warm.start_cell if fork else None
    outcome = run_processes(cell, argvs, envs, role, forked=forked)
    if forked is not None and warm.cuda_broken(cell.spec.device, outcome.result):
        # CUDA could not initialise in a forked cell here: every later cell starts fresh
        warm.refuse(outcome.result.reason)
        outcome = run_processes(cell, argvs, envs, role)
    return replace(outcome, others_before=prep.others_cores)


def describe(plan: Plan, timeout: float | None) -> str:
    """For --dry-run: per cell, the command of each node. On a real multi-node run without
    Slurm, run node i's command on node i, with MASTER_ADDR the first node's address."""
    parts = []
    for i, spec in enumerate(plan.cells, 1):
        name = f"{spec.run_id}.spec.json"
        cell = torchrun.cell_args(name, f"{spec.run_id}.result.json")
        lines = [
            f"# cell {i}/{len(plan.cells)}: {label(spec, plan.cells)}",
            torchrun.spec_heredoc(spec, name),
        ]
        if spec.distributed and spec.nodes > 1:
            for rank in range(spec.nodes):
                argv = torchrun.node(spec, "python", cell, rank, "@ADDR@", 29500)
                lines += [
                    f"# on node {rank} of {spec.nodes}:",
                    shlex.join(argv).replace("@ADDR@", '"$MASTER_ADDR"'),
                ]
        else:
            lines.append(shlex.join(commands(spec, cell, "python", base={})[0][0]))
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
