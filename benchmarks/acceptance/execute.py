"""Running one step under its time limit, its output appended to the run's log.

An stbench command runs in this process (`stbench.cli.main`): one Python and one torch import
for the whole acceptance, and one machine inventory (the GPU's, read once by a child that
initialises CUDA) instead of one a command: ~5 s a step on a GPU machine. Its cells still run
in processes of their own, each under the command's --timeout. The step's own limit is an
alarm: `OutOfTime` (a BaseException, so no `except Exception` swallows it) unwinds the command
the way Ctrl-C does, and the launcher kills the cell's process group on its way out; whatever
this process still has running below it is killed after every step. Another program (pytest)
runs in a session of its own, killed as a group at the limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import psutil

TIMED_OUT = (
    124  # coreutils' timeout's code, which the rehearsal's judge reads as "ran past its limit"
)


class OutOfTime(BaseException):
    """The step's time limit passed."""


@contextlib.contextmanager
def alarm(seconds: float):
    def ring(signum, frame):
        raise OutOfTime()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def captured(log: Path):
    """This process's stdout and stderr (file descriptors 1 and 2, so its children's too)
    appended to `log` while the block runs."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 1), os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        os.close(saved[0]), os.close(saved[1])


@contextlib.contextmanager
def environment(env: dict[str, str], argv0: str = "stbench", argv: tuple[str, ...] = ()):
    """os.environ and sys.argv as a command run by hand would see them (a study's manifest
    records sys.argv as its command line)."""
    saved_env, saved_argv = dict(os.environ), sys.argv
    os.environ.update(env)
    sys.argv = [argv0, *argv]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


def stbench(argv: tuple[str, ...], limit_s: float, env: dict[str, str] | None = None) -> int:
    """`stbench ARGV` in this process; its exit code (TIMED_OUT past the limit)."""
    from stbench.cli import main

    before = {c.pid for c in psutil.Process().children(recursive=True)}
    try:
        with environment(env or {}, "stbench", argv), alarm(limit_s):
            main(list(argv))
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except OutOfTime:
        print(f"ran past its limit of {limit_s:.0f} s", file=sys.stderr)
        return TIMED_OUT
    except Exception:  # noqa: BLE001 - a defect in a command is its step's FAIL, not the run's end
        traceback.print_exc()
        return 1
    finally:
        kill_children(before)


def program(command: tuple[str, ...], limit_s: float, env: dict[str, str] | None = None) -> int:
    """Another program in a session of its own; its exit code (TIMED_OUT past the limit)."""
    argv = [sys.executable if command[0] == "python" else command[0], *command[1:]]
    proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        print(f"ran past its limit of {limit_s:.0f} s", file=sys.stderr)
        return TIMED_OUT
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def kill_children(before: set[int]) -> None:
    """Kill what this process started during a step and still has running below it (a cell
    left by an interrupted launcher): nothing of a step may run on into the next one. The warm
    server (runner/warm.py) and its resource tracker serve every step: they stay."""
    from stbench.runner import warm

    kept = before | warm.helpers()
    left = [c for c in psutil.Process().children(recursive=True) if c.pid not in kept]
    for child in left:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(left, timeout=10)  # reaped: no zombie of a step outlives it
