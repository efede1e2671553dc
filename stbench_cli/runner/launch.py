"""Run one cell in a child process (a torchrun world for ddp) and collect what it left.

The child gets its own session, so a timed-out cell is killed with its whole process tree
(DataLoader workers, torchrun's ranks) by one signal to the group. Whatever happens to the
child, the parent returns an `Outcome`: the matrix always goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..plan.spec import DISTRIBUTED, RunSpec
from ..store.rows import CellResult
from .nvml import GpuReader, handles
from .sysmon import SystemSampler


@dataclass(frozen=True)
class Outcome:
    result: CellResult  # what the child reported; for a timeout or a crash, status and reason only
    system: list = field(default_factory=list)  # the sampler's rows
    energy: dict = field(default_factory=dict)
    unavailable: frozenset = frozenset()  # sampled fields that could not be read
    cell_s: float = 0.0  # process start to exit, as the parent saw it


def command(spec: RunSpec, spec_path: Path, result_path: Path, extra: tuple[str, ...] = ()) -> list[str]:
    cell = ["-m", "stbench.child.cell", str(spec_path), str(result_path), *extra]
    if spec.strategy in DISTRIBUTED:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={spec.world_size}", *cell]
    return [sys.executable, *cell]


def gpu_indices(spec: RunSpec) -> list[int]:
    if not spec.device.startswith("cuda"):
        return []
    if ":" in spec.device:
        return [int(spec.device.split(":")[1])]
    return list(range(spec.world_size))


def _kill_tree(pid: int) -> None:
    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        procs = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for p in procs:  # anything that left the group
        try:
            p.kill()
        except psutil.Error:
            pass


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if "Error" in ln or "error" in ln]
    return (errors or lines or [""])[-1][:300]


def _read_result(work: Path) -> CellResult | None:
    for path in [work / "result.json", *sorted(work.glob("result.rank*.json"))]:
        if path.exists():
            return CellResult.from_json(path.read_text())
    return None


def run_cell(spec: RunSpec, work: Path, log: Path, timeout: float | None, interval: float = 1.0,
             extra: tuple[str, ...] = (), gpu_uuids: tuple[str, ...] = ()) -> Outcome:
    """Run `spec` in a child; `work` is a scratch folder for its spec and result files;
    `extra` are further arguments of the child (`--profile DIR`); `gpu_uuids` name the GPUs
    the cell uses, for the sampler."""
    work.mkdir(parents=True, exist_ok=True)
    for stale in work.glob("result*.json"):
        stale.unlink()
    spec_path, result_path = work / "spec.json", work / "result.json"
    spec_path.write_text(spec.to_json())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(command(spec, spec_path, result_path, extra), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    sampler = SystemSampler(proc.pid, GpuReader(handles(list(gpu_uuids))), interval).start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_tree(proc.pid)
        proc.wait()
    except BaseException:  # Ctrl-C in the parent: leave no orphaned cell behind
        _kill_tree(proc.pid)
        raise
    finally:
        energy = sampler.stop()
    cell_s = time.perf_counter() - t0
    common = dict(system=sampler.rows, energy=energy, cell_s=cell_s, unavailable=frozenset(sampler.unavailable))
    if timed_out:
        return Outcome(CellResult("timeout", f"exceeded --timeout {timeout:g} s; process tree killed"), **common)
    result = _read_result(work)
    if result is None:
        rc = proc.returncode
        why = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        if rc == -signal.SIGKILL:
            why += " (SIGKILL: the kernel's OOM killer sends this)"
        return Outcome(CellResult("failed", f"{why}; {_last_line(log)}".rstrip("; ")), **common)
    return Outcome(result, **common)
