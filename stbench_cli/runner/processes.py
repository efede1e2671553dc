"""A cell as the launchers see it, and the process machinery the local and srun launchers share.

A cell's processes (one, a torchrun agent, N agents, or an srun) run in one process group of
their own, so a timed-out cell is killed with its whole tree (DataLoader workers, torchrun's
ranks) by one signal to the group. Whatever happens, the launcher returns an `Outcome`: the
matrix always goes on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..device import is_cuda, parse
from ..plan.launcher_config import Launch
from ..plan.spec import RunSpec
from ..store.rows import CellResult
from .nvml import GpuReader, handles
from .sysmon import SystemSampler


@dataclass(frozen=True)
class Outcome:
    result: CellResult  # what the child reported; for a timeout or a crash, status and reason only
    system: list = field(default_factory=list)  # the sampler's rows
    energy: dict = field(default_factory=dict)
    unavailable: frozenset = frozenset()  # sampled fields that could not be read
    cell_s: float = 0.0  # process start to exit, as the parent (or Slurm's accounting) saw it
    job_id: str | None = None  # the Slurm job (or job.step) that ran it
    others_before: float | None = None  # other processes' CPU use (cores) before it (issue 32)


@dataclass(frozen=True)
class CellJob:
    """One cell to start: its spec, the study folder it writes into, and the study's options."""

    spec: RunSpec
    folder: Path
    timeout: float | None = None
    interval: float = 1.0  # the system sampler's period
    extra: tuple[str, ...] = ()  # further arguments of the child (`--profile DIR`)
    launch: Launch = Launch()
    gpu_uuids: tuple[str, ...] = ()  # the GPUs of this machine the cell uses, for the sampler

    @property
    def work(self) -> Path:  # scratch folder of the cell: its spec, its result (on the shared FS for Slurm)
        return self.folder / ".cells" / self.spec.run_id

    @property
    def spec_path(self) -> Path:
        return self.work / "spec.json"

    @property
    def result_path(self) -> Path:
        return self.work / "result.json"

    @property
    def log(self) -> Path:
        return self.folder / "logs" / f"{self.spec.run_id}.log"

    def prepare(self) -> None:
        """Write the spec for the child; drop results an earlier attempt left."""
        self.work.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        for stale in self.work.glob("result*.json"):
            stale.unlink()
        self.spec_path.write_text(self.spec.to_json())


def label(spec: RunSpec) -> str:
    """A cell in one line, for printed scripts."""
    world = f" {spec.nodes}x{spec.nproc_per_node}" if spec.distributed else ""
    return (f"{spec.workload} {spec.device} {spec.strategy}{world} batch={spec.batch_size} epochs={spec.epochs} "
            f"repeat={spec.repeat} (run_id {spec.run_id})")


def gpu_indices(spec: RunSpec) -> list[int]:
    d = parse(spec.device)
    if not d.is_cuda:
        return []
    if d.index is not None:
        return [d.index]
    return list(range(spec.world_size))


def _signal_all(procs: list[psutil.Process], pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    for p in procs:  # anything that left the group
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def kill_group(pids: list[int], grace: float = 0.0) -> None:
    """Kill the group of the first pid and every descendant of every pid; with `grace`, SIGTERM
    first (srun cancels its step on SIGTERM; a SIGKILLed srun would leave the step running)."""
    procs = []
    for pid in pids:
        try:
            procs += psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            pass
    if grace > 0:
        _signal_all(procs, pids[0], signal.SIGTERM)
        psutil.wait_procs([p for p in procs if p.is_running()], timeout=grace)
    _signal_all(procs, pids[0], signal.SIGKILL)


def last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if "Error" in ln or "error" in ln]
    return (errors or lines or [""])[-1][:300]


def read_result(work: Path) -> CellResult | None:
    """Rank 0's result, else the first failing rank's."""
    for path in [work / "result.json", *sorted(work.glob("result.rank*.json"))]:
        if path.exists():
            return CellResult.from_json(path.read_text())
    return None


def _kill_leftovers(cell: CellJob) -> None:
    """An earlier parent of this study died (SIGKILL) while this cell ran here: what it started
    may still run, torchrun's ranks included (torchrun starts each in a session of its own, so
    no process group holds them all). Every process that names this cell's spec file is one of
    those (the folder has one owner at a time, and this attempt has not started yet)."""
    try:
        old = json.loads((cell.work / "group.json").read_text())
    except (OSError, ValueError):
        return
    if old.get("host") != socket.gethostname():
        return
    for _ in range(10):  # again until none is left: a dying agent may have been starting a rank
        found = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if str(cell.spec_path) in " ".join(p.info["cmdline"] or []):  # an srun's is inside its bash -c
                    p.kill()
                    found.append(p)
            except psutil.Error:
                pass
        if not found:
            return
        psutil.wait_procs(found, timeout=5)


def _group(pgid: int) -> dict:
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}


def _start(commands: list[list[str]], envs: list[dict], log) -> list[subprocess.Popen]:
    """Start every command in one new process group (that of the first): a timeout or Ctrl-C
    then reaches all of them with one signal, and the terminal's Ctrl-C reaches only the parent."""
    procs: list[subprocess.Popen] = []
    for argv, env in zip(commands, envs):
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env=env, **_group(procs[0].pid if procs else 0)))
    return procs


def _wait_all(procs: list[subprocess.Popen], timeout: float | None) -> bool:
    """Wait for every process; False when the cell's time ran out first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for p in procs:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            return False
    return True


def run_processes(cell: CellJob, commands: list[list[str]], envs: list[dict], grace: float = 0.0) -> Outcome:
    """Run a prepared cell's processes as one group beside the system sampler; collect the result."""
    _kill_leftovers(cell)
    t0 = time.perf_counter()
    with open(cell.log, "w") as out:
        procs = _start(commands, envs, out)
    pids = [p.pid for p in procs]
    (cell.work / "group.json").write_text(json.dumps({"host": socket.gethostname(), "pids": pids}))
    sampler = SystemSampler(pids, GpuReader(handles(list(cell.gpu_uuids))), cell.interval,
                            gpu_cell=is_cuda(cell.spec.device)).start()
    try:
        finished = _wait_all(procs, cell.timeout)
        if not finished:
            kill_group(pids, grace)
            for p in procs:
                p.wait()
    except BaseException:  # Ctrl-C in the parent: leave no orphaned cell behind
        kill_group(pids, grace)
        raise
    finally:
        energy = sampler.stop()
    common = dict(system=sampler.rows, energy=energy, cell_s=time.perf_counter() - t0,
                  unavailable=frozenset(sampler.unavailable))
    if not finished:
        return Outcome(CellResult("timeout", f"exceeded --timeout {cell.timeout:g} s; process tree killed"), **common)
    result = read_result(cell.work)
    if result is None:
        rc = next((p.returncode for p in procs if p.returncode), procs[0].returncode)
        why = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        if rc == -signal.SIGKILL:
            why += " (SIGKILL: the kernel's OOM killer sends this)"
        return Outcome(CellResult("failed", f"{why}; {last_line(cell.log)}".rstrip("; ")), **common)
    return Outcome(result, **common)
