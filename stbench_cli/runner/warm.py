"""Warm cells: a cell's process forked from a server that has already imported
torch, the cell's modules and every workload, so that a cell costs its training and little else.

A cell's process used to start cold: a Python, torch (2.3 s on the 2-core VM), torch._dynamo
(1.3 s, imported by the FLOP counter's dispatch mode at its first operator), the workloads; and
the parent imported torch itself for the inventory. Here one server per stbench command, started
as soon as the command knows it will run cells, imports all of that once (multiprocessing's
forkserver with preloads: the standard library's, not a launcher of stbench's) and forks each
single-process cell from it. What stays the same: a process per cell (a crash, an OOM or a hang
is still one row), the cell's own environment, log and process group, the watchdog.

The server never runs an operator and never asks CUDA anything: CUDA is initialised in the cell,
after the fork (`PYTORCH_NVML_BASED_CUDA_CHECK` in the server's environment makes any
availability question an import might ask go to NVML instead of the CUDA driver, which a fork
would inherit broken). No thread pool has started there either, so a cell sets its threads as a
fresh process does.

Where a fork cannot give the cell what a fresh process would, the launcher starts one instead
(`fits`): a multi-process world (torchrun), a preloaded allocator or a numactl prefix (both act
when a process starts), or an environment that differs from the server's in anything read at
import time (another PYTHONPATH, a faked CUDA). `STBENCH_WARM=0` turns warm cells off.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import traceback
import types
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

from ..store.progress import LAUNCHED_ENV, PARENT_ENV

# What the server imports: everything a cell imports before its first step.
PRELOAD = ("stbench.child.preload",)
# Environment variables a forked cell sets in its own environment before anything reads them
# (threads are set by the cell, CUDA reads its variables at initialisation, gloo and NCCL when a
# group is made). Any other difference from the server's environment was read when the server
# imported torch, so a cell whose environment differs so starts a fresh process.
LATE = frozenset(
    {
        "PYTHONUNBUFFERED",
        "OMP_NUM_THREADS",
        "CUDA_VISIBLE_DEVICES",
        "GLOO_SOCKET_IFNAME",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "PYTORCH_NVML_BASED_CUDA_CHECK",
        "STBENCH_THREADS",
        LAUNCHED_ENV,
        PARENT_ENV,  # read by the cell's heartbeat thread
        # torch sets it in a process's environment the first time inductor asks for its cache
        # (a step's anatomy measured in the parent does) and reads it only then, never at import
        "TORCHINDUCTOR_CACHE_DIR",
        # stbench's cache folder: read where a cell or the parent asks for it, never at import
        "STBENCH_CACHE",
    }
)
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
FORKED = "stbench: this cell's process was forked from the warm server"  # its log's first line

_server: dict | None = None  # the environment the server started with; None: not started
_refused: str | None = None  # why warm cells are off in this process (a failed CUDA fork)


def enabled() -> bool:
    return (
        os.environ.get("STBENCH_WARM", "1") != "0"
        and "forkserver" in multiprocessing.get_all_start_methods()
        and _refused is None
    )


def _context():
    return multiprocessing.get_context("forkserver")


def start_server(workload: str | None = None) -> None:
    """Start the server now, if it is not running: it imports while the parent plans; the
    modules `workload` names as its `preload` too (a command about one workload), after
    stbench's own (multiprocessing's server passes over one that cannot be imported)."""
    global _server
    if not enabled() or _server is not None:
        return
    from multiprocessing import forkserver

    ctx = _context()
    ctx.set_forkserver_preload([*PRELOAD, *workload_preload(workload)])
    had = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"  # the server's only: each cell sets its own environment
    try:
        with _silenced():
            forkserver.ensure_running()
    finally:
        if had is None:
            del os.environ[NVML_CHECK]
        else:
            os.environ[NVML_CHECK] = had
    _server = dict(os.environ)
    atexit.register(_stop)


def workload_preload(workload: str | None) -> tuple[str, ...]:
    """The modules a workload asks the server to import (none for an unknown name: the command
    refuses it with its own line)."""
    from ..errors import StbenchError
    from ..plan import registry

    try:
        return registry.get(workload).preload if workload else ()
    except StbenchError:
        return ()


@contextlib.contextmanager
def _silenced():
    """This process's output and errors go nowhere while the server starts, so that the server
    holds none of them: a caller that reads a command's output (a pipe) sees its end when the
    command ends, not when the server does. Each cell opens its own log."""
    sys.stdout.flush()
    sys.stderr.flush()
    kept = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(kept[0], 1)
        os.dup2(kept[1], 2)
        for fd in (*kept, null):
            os.close(fd)


def _stop() -> None:
    """At this process's exit: the server goes with it, even while it is still importing (it
    would otherwise finish its imports first, seconds of a core, before it saw its parent gone):
    a SIGTERM, then multiprocessing's own stop of its forkserver, which reaps it (private names
    of multiprocessing.forkserver, there since 3.4 and 3.8; without them, the server ends by
    itself once it sees its parent gone)."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    pid, stop = getattr(server, "_forkserver_pid", None), getattr(server, "_stop", None)
    with contextlib.suppress(Exception):
        if pid is not None:
            os.kill(pid, signal.SIGTERM)  # it may be importing: it reads no request till done
        if stop is not None:
            stop()  # closes its pipe and reaps it


def compatible(env: Mapping[str, str], server: Mapping[str, str]) -> bool:
    """Whether a process with environment `env` forked from a server started with `server` is
    the process a fresh start would make: they differ only in what is read after the fork."""
    return {k for k in set(env) | set(server) if env.get(k) != server.get(k)} <= LATE


def helpers() -> set[int]:
    """The processes multiprocessing keeps for this one: the server and its resource tracker,
    which a caller that kills what a command left running (the GPU acceptance between steps)
    leaves alone."""
    from multiprocessing import forkserver, resource_tracker

    pids = {
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    }
    return {p for p in pids if p is not None}


def fits(env: Mapping[str, str]) -> bool:
    """Whether a cell with this environment can be forked from the server (started here)."""
    start_server()
    return _server is not None and enabled() and compatible(env, _server)


def refuse(why: str) -> None:
    """No more warm cells in this process (a CUDA cell could not initialise after the fork)."""
    global _refused
    _refused = why


# what a CUDA cell says when its process cannot initialise CUDA after the fork
CUDA_FORK_ERRORS = (
    "Cannot re-initialize CUDA in forked subprocess",
    "CUDA driver initialization failed",
    "initialization error",
)


class Unavailable(RuntimeError):
    """The server could not fork the cell (it stopped, or refused to start)."""


def cuda_broken(device: str, result) -> bool:
    """A CUDA cell forked here failed because CUDA could not initialise in it."""
    from ..device import is_cuda

    return (
        is_cuda(device)
        and result.status == "failed"
        and any(m in (result.reason or "") for m in CUDA_FORK_ERRORS)
    )


@contextlib.contextmanager
def _main_not_rerun():
    """While a process starts: multiprocessing runs the parent's main script again in every
    process it starts this way (so that functions defined there can be unpickled), unless the
    main module names itself `__main__`; its preload of `__main__` would spare that once, but
    does not take (CPython passes it no path). Nothing stbench sends is defined in a main script,
    so the main module says so while a process starts: a cell does not import the CLI again."""
    main = sys.modules["__main__"]
    had = main.__dict__.get("__spec__")
    main.__spec__ = types.SimpleNamespace(name="__main__")
    try:
        yield
    finally:
        main.__spec__ = had


class Forked:
    """A forked cell as `watch` sees a process: pid, poll(), wait()."""

    def __init__(self, process: multiprocessing.process.BaseProcess):
        self.process = process
        self.pid = process.pid

    def poll(self) -> int | None:
        return self.process.exitcode

    def wait(self) -> int | None:
        self.process.join()
        return self.process.exitcode


def start_cell(
    command: list[str], env: Mapping[str, str], log: Path, errors: Path | None = None
) -> Forked:
    """Fork `python -m MODULE ARGS` (the command a fresh process would run: a cell, a doctor's
    check, the peaks) from the server: the module run as __main__ in a process of its own, with
    this environment, its output appended to `log` (its errors to `errors` where given)."""
    start_server()
    argv = command[command.index("-m") :]
    paths = (str(log), str(errors or log))
    proc = _context().Process(target=_run_cell, args=(argv, dict(env), *paths), name="stbench-cell")
    try:
        with _main_not_rerun():
            proc.start()
    except (OSError, EOFError, ValueError) as exc:  # the server stopped (or never served)
        refuse(f"the warm server failed: {exc}")
        raise Unavailable(str(exc)) from exc
    return Forked(proc)


def _run_cell(argv: list[str], env: dict[str, str], log: str, errors: str) -> None:
    """In the forked process: a process group of its own (a timeout or Ctrl-C ends the cell and
    its loader workers with one signal, and the terminal's Ctrl-C reaches only the parent), the
    cell's environment and output, then the module as `python -m` runs it (a cell's module ends
    its process itself, os._exit, and never returns here)."""
    refuse("a process forked from the server starts no server of its own")
    # multiprocessing made this process its forkserver's child and set its start method so;
    # a `python -m` process starts with the platform's, and a DataLoader's workers must start
    # as they would there (forkserver workers outlive a cell that ends by os._exit)
    multiprocessing.set_start_method(None, force=True)
    os.setpgid(0, 0)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    err = os.open(errors, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
    for fd in (out, err, null):
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True, write_through=True)
    os.environ.clear()
    os.environ.update(env)
    print(f"{FORKED} (pid {os.getppid()})", file=sys.stderr, flush=True)
    module = argv[argv.index("-m") + 1]
    sys.argv = [module, *argv[argv.index("-m") + 2 :]]
    # runpy warns that the module was imported before it runs as __main__: the server imported
    # it on purpose, and nothing of it runs at import
    warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:  # as the interpreter ends `python -m` on sys.exit(...)
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter would, then exit 1
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # a cell ends itself before (child/cell.py); a module that returns: 0


def call(fn: Callable, *args):
    """fn(*args) in a process forked from the server, its result sent back (pickled): what the
    parent would otherwise import torch for (the inventory). Runs here where warm cells are off."""
    start_server()
    if _server is None or not enabled():
        return fn(*args)
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_answer, args=(send, fn, args), name="stbench-inventory")
    with _main_not_rerun():
        proc.start()
    send.close()
    try:
        ok, value = receive.recv()
    except EOFError:
        ok, value = False, RuntimeError(f"the inventory's process ended with {proc.exitcode}")
    finally:
        proc.join()
        receive.close()
    if not ok:
        raise value
    return value


def _answer(send, fn: Callable, args: tuple) -> None:
    refuse("a process forked from the server starts no server of its own")
    try:
        send.send((True, fn(*args)))
    except Exception as exc:  # sent back, raised in the parent
        send.send((False, exc))
    finally:
        send.close()


def run_module(command: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """`subprocess.run(command, capture_output=True, text=True)` for `python -m MODULE ...`,
    forked from the server where this process's environment fits it (a doctor's check, the
    peaks, the GPUs' names: each would otherwise import torch again)."""
    return Module(command).result(timeout)


class Module:
    """`python -m MODULE ...` started: forked from the server where this process's environment
    fits it, else a process of its own; its `pid` while it runs (what a sampler watches), its
    `result()` once it ends, as `subprocess.run(..., capture_output=True, text=True)` gives."""

    def __init__(self, command: list[str]):
        self.command = command
        self._forked: Forked | None = None
        env = dict(os.environ)
        if fits(env):
            self._tmp = tempfile.TemporaryDirectory(prefix="stbench-warm-")
            self._out, self._err = Path(self._tmp.name) / "stdout", Path(self._tmp.name) / "stderr"
            try:
                self._forked = start_cell(command, env, self._out, self._err)
                self.pid = self._forked.pid
                return
            except Unavailable:  # the server is gone: a fresh process, as without one
                self._tmp.cleanup()
        self._fresh = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.pid = self._fresh.pid

    def result(self, timeout: float | None = None) -> subprocess.CompletedProcess:
        if self._forked is None:
            try:
                out, err = self._fresh.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._fresh.kill()
                self._fresh.communicate()
                raise
            return subprocess.CompletedProcess(self.command, self._fresh.returncode, out, err)
        try:
            self._forked.process.join(timeout)
            if self._forked.poll() is None:
                self._forked.process.kill()
                self._forked.process.join()
                raise subprocess.TimeoutExpired(self.command, timeout)
            said = self._err.read_text(errors="replace").partition("\n")[2]  # less the fork's line
            code = self._forked.poll()
            return subprocess.CompletedProcess(self.command, code, self._out.read_text(), said)
        finally:
            self._tmp.cleanup()
