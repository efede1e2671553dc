"""A cell as the launchers see it, and the process machinery the local and srun launchers share.

A cell's processes (one, a torchrun agent, N agents, or an srun) run in one process group of
their own and are watched together (watch.py): the first to fail ends all of them, on every
node, within seconds; so do `--timeout` and the stall watchdog. Whatever happens, the launcher
returns an `Outcome` whose result says what ended the cell (verdict.py): the matrix always goes on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..device import is_cuda, parse
from ..plan.launcher_config import Launch
from ..plan.spec import RunSpec, cell_label, varied_params
from ..store.cell_result import CellResult
from ..store.progress import cell_work, launch_env, pg_timeout, read_beats
from . import verdict, warm
from .nvml import GpuReader, handles
from .sysmon import SystemSampler
from .watch import Ending, Stalls, kill_group, kill_leftovers, started, sweep, watch


@dataclass(frozen=True)
class Outcome:
    result: CellResult  # what the child reported; for a timeout or a crash, status and reason only
    system: list = field(default_factory=list)  # the sampler's rows
    energy: dict = field(default_factory=dict)
    unavailable: frozenset = frozenset()  # sampled fields that could not be read
    cell_s: float = 0.0  # process start to exit, as the parent (or Slurm's accounting) saw it
    job_id: str | None = None  # the Slurm job (or job.step) that ran it
    others_before: float | None = None  # other processes' CPU use (cores) before it


@dataclass(frozen=True)
class CellJob:
    """One cell to start: its spec, the study folder it writes into, and the study's options."""

    spec: RunSpec
    folder: Path
    timeout: float | None = None
    interval: float = 1.0  # the system sampler's period
    profile: Path | None = None  # `stbench profile`: the folder for the cell's traces
    launch: Launch = Launch()
    gpu_uuids: tuple[str, ...] = ()  # the GPUs of this machine the cell uses, for the sampler
    stall: float | None = None  # --stall-limit: None derives it from the cell's progress
    # what the launcher opened for the study (launchers.opened: a Dask cluster), else None
    session: object = field(default=None, compare=False, repr=False)

    @property
    def child_args(self) -> tuple[str, ...]:
        """The child's options: heartbeats for the stall watchdog, the process groups' timeout
        that goes with its limit (store/progress.py), and where a profiled study's traces go."""
        traces = ("--profile", str(self.profile)) if self.profile else ()
        return ("--progress", "--pg-timeout", f"{pg_timeout(self.stall):g}", *traces)

    @property
    def work(
        self,
    ) -> Path:  # scratch folder of the cell: its spec, its result (on the shared FS for Slurm)
        return cell_work(self.folder, self.spec.run_id)

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


def label(spec: RunSpec, cells: list[RunSpec] = ()) -> str:
    """A cell in one line, for printed scripts: its workload, the progress line's words (with
    each parameter that tells it from the study's other `cells`) and its run id."""
    return f"{spec.workload} {cell_label(spec, varied_params(cells))} (run_id {spec.run_id})"


def gpu_indices(spec: RunSpec) -> list[int]:
    d = parse(spec.device)
    if not d.is_cuda:
        return []
    if d.index is not None:
        return [d.index]
    return list(range(spec.world_size))


def _group(pgid: int) -> dict:
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}


def _start_group(commands: list[list[str]], envs: list[dict], log) -> list[subprocess.Popen]:
    """Start every command in one new process group (that of the first): a timeout or Ctrl-C
    then reaches all of them with one signal, and the terminal's Ctrl-C reaches only the parent."""
    procs: list[subprocess.Popen] = []
    for argv, env in zip(commands, envs):
        procs.append(
            subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                **_group(procs[0].pid if procs else 0),
            )
        )
    return procs


def read_results(work: Path) -> dict[int, CellResult]:
    """Rank 0's result (RESULT.json: its figures, or its failure) and each other rank's failure."""
    out = {}
    for path in [work / "result.json", *sorted(work.glob("result.rank*.json"))]:
        rank = int(path.stem.removeprefix("result.rank")) if ".rank" in path.stem else 0
        try:
            out[rank] = CellResult.from_json(path.read_text())
        except (OSError, ValueError, TypeError):  # half of a file a killed rank was writing
            continue
    return out


def end_world(cell: CellJob, pids: list[int], grace: float = 0.0) -> None:
    """Kill every process of the cell: its group and their trees, then any that escaped both
    (torchrun's ranks run in sessions of their own; an agent killed alone orphans its ranks)."""
    kill_group(pids, grace)
    sweep(cell.spec_path)


def result_of(cell: CellJob, ending: Ending, role: str) -> CellResult:
    """The row's result from what ended the cell (verdict.py). role: what each process is,
    "agent" (a torchrun agent, node i), "cell" (the rank itself) or "step" (an srun step)."""
    if ending.timed_out:
        return CellResult("timeout", f"exceeded --timeout {cell.timeout:g} s; process tree killed")
    if ending.stall is not None:
        s = ending.stall
        return verdict.hung(cell.spec, s.idle_s, s.limit_s, cell.stall, s.beats)
    log = cell.log.read_text(errors="replace") if cell.log.exists() else ""
    first = (*ending.first, role) if ending.first else None
    return verdict.cell_outcome(
        cell.spec, first, log, read_results(cell.work), read_beats(cell.work)
    )


def run_processes(
    cell: CellJob,
    commands: list[list[str]],
    envs: list[dict],
    role: str,
    grace: float = 0.0,
    forked: Callable[[list[str], dict, Path], object] | None = None,
) -> Outcome:
    """Run a prepared cell's processes as one group beside the system sampler, watched together
    (watch.py): the first to fail, a stall or the timeout ends them all. `forked(command, env,
    log)`: start the cell's one process from the warm server instead (warm.py)."""
    kill_leftovers(cell.work, cell.spec_path)
    launched = launch_env(time.time())  # the timeline's zero, and who launched it
    envs = [{**env, **launched} for env in envs]
    t0 = time.perf_counter()
    with open(cell.log, "w") as out:
        try:
            procs = (
                [forked(commands[0], envs[0], cell.log)]
                if forked
                else _start_group(commands, envs, out)
            )
        except warm.Unavailable:  # the server is gone: this cell, and later ones, start fresh
            procs = _start_group(commands, envs, out)
    pids, sampler = [p.pid for p in procs], None
    # from here on a stop (Ctrl-C, SIGTERM) ends the cell's processes wherever it lands: it came
    # once between the group file and the watch, and the cell trained on without its parent
    try:
        (cell.work / "group.json").write_text(
            json.dumps({"host": socket.gethostname(), "pids": pids, "started": started(pids)})
        )
        sampler = SystemSampler(
            pids,
            GpuReader(handles(list(cell.gpu_uuids))),
            cell.interval,
            gpu_cell=is_cuda(cell.spec.device),
        ).start()
        ending = watch(procs, cell.timeout, Stalls(cell.work, cell.stall, cell.spec.world_size))
        if not ending.clean:
            end_world(cell, pids, grace)
        for p in procs:
            p.wait()
    except BaseException:  # a stop in the parent: leave no orphaned cell behind
        end_world(cell, pids, grace)
        raise
    finally:
        energy = sampler.stop() if sampler is not None else None
    return Outcome(
        result_of(cell, ending, role),
        system=sampler.rows,
        energy=energy,
        cell_s=time.perf_counter() - t0,
        unavailable=frozenset(sampler.unavailable),
    )
