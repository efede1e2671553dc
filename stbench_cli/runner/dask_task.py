"""What a Dask worker runs for `--launcher dask` (launchers/dask_world.py submits these).

The worker imports this module, and only the standard library with it: a worker of a cluster
that is not stbench's own need not import the parent's launchers to start a rank.

    run_rank   one task per rank, pinned to its worker: start the cell's process, `python -m
               stbench.child.cell SPEC RESULT ...` with the worker's own Python and torchrun's
               variables in its environment (dask-pytorch-ddp's pattern), and wait for it
    worker_port  a port worker 0 can listen on, for the world's rendezvous (MASTER_PORT)
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_worker() -> None:
    """In the rank's process before exec: the kernel kills it when the worker thread that
    started it dies (a worker killed, or lost with its machine), so a lost worker leaves no rank
    training on without it; and a session of its own, as torchrun gives its ranks."""
    os.setsid()
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's sweep still ends it
        pass


def run_rank(cell: list[str], env: dict[str, str], log: str) -> dict:
    """Start one rank of a cell and wait for it; its exit code, pid and host. The task leaves
    the worker's thread pool first (`secede`): a rank trains for minutes, and its worker's
    threads stay free for the tasks that serve a Dask array to the ranks (dask-index)."""
    try:
        from distributed import secede

        secede()
    except (ImportError, ValueError):  # not in a worker's task (a test calling it directly)
        pass
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, *cell],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_worker,
        )
    return {"code": proc.wait(), "pid": proc.pid, "host": socket.gethostname()}


def worker_port() -> int:
    """A free TCP port on this worker's machine (the rendezvous of rank 0 listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]
