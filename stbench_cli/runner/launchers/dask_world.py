"""`--launcher dask`: a cell's world on the workers of a Dask cluster, one rank per worker.

The pattern is dask-pytorch-ddp's: the cluster's workers sorted by address, rank i's task
pinned to the i-th (`workers=[w]`, never elsewhere), MASTER_ADDR the host of worker 0 and
MASTER_PORT a port free there. Each task (runner/dask_task.py) starts the same cell process every
other launcher starts, `python -m stbench.child.cell SPEC RESULT ...`, with the worker's Python
and torchrun's variables in its environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR, MASTER_PORT), so a rank's code does not know how it was placed. Its
environment also names the scheduler (DASK_SCHEDULER_ADDRESS): a rank that reads a Dask array
(dcrnn-pems' dask-index) finds the cluster as `distributed.Client()` does.

Watched as a torchrun world is (watch.py): the parent polls the ranks' tasks together, and the
cluster's workers every second. A rank that exits non-zero or a worker that leaves the cluster
(killed, or lost with its machine: its rank dies with it, runner/dask_task.py) ends the world
after GRACE_S, the other ranks killed on their workers; the row is `failed` and names the worker
and the rank. Beats in the study folder (a file system the workers share, as for Slurm) feed
the stall watchdog (`hung`), the parent's clock --timeout. The ranks' logs, one per rank in the
cell's scratch folder, become the cell's one log.
"""

from __future__ import annotations

import shlex
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ...errors import StbenchError, require
from ...plan.planner import Plan
from ...plan.spec import RunSpec
from ...store.cell_result import CellResult
from ...store.progress import LAUNCHED_ENV, read_beats
from .. import verdict
from ..dask_task import run_rank, worker_port
from ..processes import CellJob, Outcome, label, read_results
from ..watch import GRACE_S, POLL_S, Ending, Stalls, sweep
from . import dask_cluster, torchrun

WORKERS_EVERY_S = 1.0  # how often the parent asks the scheduler which workers are left
_LOOPBACK = ("127.", "localhost", "::1")


def host_of(worker: str) -> str:
    """The host of a worker's address: tcp://10.0.0.5:40331 -> 10.0.0.5 ([::1] -> ::1)."""
    return worker.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")


def rank_envs(spec: RunSpec, workers: list[str], port: int, scheduler: str) -> list[dict[str, str]]:
    """Each rank's environment, torchrun's variables from the workers' order: the ranks on one
    host are its local ranks, the hosts in order of their first rank are the nodes."""
    hosts = [host_of(w) for w in workers]
    nodes = list(dict.fromkeys(hosts))
    loopback = all(h.startswith(_LOOPBACK) for h in hosts)
    out = []
    for rank, host in enumerate(hosts):
        local = [r for r, h in enumerate(hosts) if h == host]
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(len(workers)),
            "LOCAL_RANK": str(local.index(rank)),
            "LOCAL_WORLD_SIZE": str(len(local)),
            "GROUP_RANK": str(nodes.index(host)),
            "MASTER_ADDR": hosts[0],
            "MASTER_PORT": str(port),
            "DASK_SCHEDULER_ADDRESS": scheduler,
            "PYTHONUNBUFFERED": "1",
        }
        if loopback:  # every worker on this machine: gloo over loopback, as local nodes have it
            env["GLOO_SOCKET_IFNAME"] = "lo"
        out.append(env)
    return out


def largest_world(plan: Plan) -> int:
    return max((c.world_size for c in plan.cells if c.run_id not in plan.skips), default=1)


def check(plan: Plan) -> None:
    """One line for what cannot work before anything is written: no distributed, no cluster
    named anywhere, a cluster class whose package is missing."""
    require("distributed", "--launcher dask")
    dask_cluster.where(plan.launch)
    if plan.launch.dask_options.get("cluster", "local") != "local":
        require("dask_jobqueue", "--dask cluster=...")


@contextmanager
def opened(plan: Plan):
    """The study's cluster for its cells (a study's largest world of workers), closed after."""
    cluster = dask_cluster.connect(plan.launch, largest_world(plan), plan.folder)
    try:
        yield cluster
    finally:
        cluster.close()


def _code(future) -> int | None:
    """A rank task's exit code once it ended (an error in the task itself is 1), else None."""
    if future.status == "finished":
        return int(future.result()["code"])
    return None if future.status == "pending" else 1


@dataclass(frozen=True)
class Seen:
    """What ended a Dask world: watch.py's Ending, every rank's exit code the parent saw, and
    each (rank, worker) whose worker left the cluster."""

    ending: Ending
    exits: dict[int, int]
    lost: list[tuple[int, str]]


def _await_ranks(cluster, futures, workers, timeout, stalls) -> Seen:
    """Until every rank ended, or one failed or its worker left (the others then get GRACE_S),
    the timeout, or a stall."""
    start = look_at = time.monotonic()
    first, failed_at, lost, codes = None, 0.0, [], []
    while True:
        now = time.monotonic()
        if now >= look_at:
            look_at = now + WORKERS_EVERY_S
            alive = set(cluster.workers())
            lost = [(r, w) for r, w in enumerate(workers) if w not in alive]
            stall = stalls.look(now)
            if stall is not None and first is None and not lost:
                return Seen(Ending(stall=stall), {}, lost)
        codes = [_code(f) for f in futures]
        if first is None and (any(codes) or lost):
            first = ([(r, c) for r, c in enumerate(codes) if c] or [(lost[0][0], 0)])[0]
            failed_at = now
        exits = {r: c for r, c in enumerate(codes) if c}
        if (all(c is not None for c in codes) and not lost) or (
            first and now - failed_at >= GRACE_S
        ):
            return Seen(Ending(first), exits, lost)
        if timeout is not None and now - start >= timeout:
            return Seen(Ending(first, timed_out=True), exits, lost)
        time.sleep(POLL_S)


def _end(cluster, futures, cell: CellJob, workers: list[str]) -> None:
    """Kill the world's ranks on every worker still there (by the spec file they name, as
    `sweep` finds torchrun's orphans) and forget their tasks."""
    alive = [w for w in workers if w in set(cluster.workers())]
    cluster.client.cancel(futures)
    if alive:
        cluster.client.run(sweep, cell.spec_path, workers=alive, on_error="ignore")


def _gather_logs(cell: CellJob, workers: list[str]) -> None:
    """The ranks' logs (the study folder, shared) as the cell's one log, rank by rank."""
    parts = []
    for rank, worker in enumerate(workers):
        path = cell.work / f"rank{rank}.log"
        text = path.read_text(errors="replace") if path.exists() else "(no log)\n"
        parts.append(f"==> rank {rank} on worker {worker} <==\n{text}")
    cell.log.write_text("\n".join(parts))


def ranks_result(cell: CellJob, seen: Seen, workers: list[str]) -> CellResult:
    """The row's result: a lost worker first (its rank died with it), then what verdict.py
    makes of the ranks' exits, each rank named by its worker."""
    ending, lost = seen.ending, seen.lost
    places = {rank: f"worker {w}" for rank, w in enumerate(workers)}
    if ending.timed_out:
        return CellResult("timeout", f"exceeded --timeout {cell.timeout:g} s; its ranks killed")
    beats = read_beats(cell.work)
    if ending.stall is not None:
        s = ending.stall
        return verdict.hung(cell.spec, s.idle_s, s.limit_s, cell.stall, s.beats, places)
    results = read_results(cell.work)
    if lost:
        rank, worker = lost[0]
        said = f"worker {worker} (rank {rank}) lost: it left the Dask cluster "
        said += verdict.when(rank, beats)
        written = results.get(0)
        if written is not None and written.status == "ok":
            return replace(written, status="failed", reason=f"{said} (rank 0's figures kept)")
        return CellResult("failed", said)
    log = cell.log.read_text(errors="replace")
    first = (*ending.first, "rank") if ending.first else None
    return verdict.cell_outcome(cell.spec, first, log, results, beats, seen.exits, places)


def _submit(cluster, cell: CellJob, workers: list[str]) -> list:
    """One task per rank, pinned to its worker, each starting the cell's process there."""
    client, spec = cluster.client, cell.spec
    port = client.run(worker_port, workers=[workers[0]])[workers[0]]
    args = torchrun.cell_args(cell.spec_path, cell.result_path, cell.child_args)
    launched = {LAUNCHED_ENV: f"{time.time():.3f}"}  # the timeline's zero
    nonce = uuid.uuid4().hex[:8]
    return [
        client.submit(
            run_rank,
            args,
            {**env, **launched},
            str(cell.work / f"rank{rank}.log"),
            key=f"stbench-{spec.run_id}-rank{rank}-{nonce}",
            workers=[worker],
            allow_other_workers=False,
            pure=False,
        )
        for rank, (worker, env) in enumerate(
            zip(workers, rank_envs(spec, workers, port, cluster.address))
        )
    ]


def run_cell(cell: CellJob) -> Outcome:
    cluster, spec = cell.session, cell.spec
    cell.prepare()
    try:  # workers lost since an earlier cell (and not replaced): this cell cannot run
        dask_cluster.wait_for(cluster, spec.world_size, dask_cluster.CONNECT_S, "this cell")
        workers = cluster.workers()[: spec.world_size]
        t0 = time.perf_counter()
        futures = _submit(cluster, cell, workers)
    except Exception as exc:  # a worker gone while its port or task was asked for, too
        said = str(exc) if isinstance(exc, StbenchError) else f"{type(exc).__name__}: {exc}"
        return Outcome(CellResult("failed", said[:400]))
    try:
        seen = _await_ranks(
            cluster, futures, workers, cell.timeout, Stalls(cell.work, cell.stall, spec.world_size)
        )
        if not seen.ending.clean or seen.lost:
            _end(cluster, futures, cell, workers)
    except BaseException:  # Ctrl-C in the parent: leave no rank running on the cluster
        _end(cluster, futures, cell, workers)
        raise
    _gather_logs(cell, workers)
    return Outcome(ranks_result(cell, seen, workers), cell_s=time.perf_counter() - t0)


def describe(plan: Plan, timeout: float | None) -> str:
    """For --dry-run: where the cluster is, dask-jobqueue's job script where stbench would
    start one, and each rank's command as its task runs it on its worker."""
    launch = plan.launch
    head = [f"# --launcher dask: {dask_cluster.where(launch)}"]
    if launch.dask_options.get("cluster", "local") != "local":
        head += [
            f"# dask-jobqueue submits this job script {largest_world(plan)} time(s), one worker "
            "per job:",
            dask_cluster.job_script(launch),
        ]
    parts = ["\n".join(head)]
    for i, spec in enumerate(plan.cells, 1):
        name = f"{spec.run_id}.spec.json"
        cell = torchrun.cell_args(name, f"{spec.run_id}.result.json")
        lines = [
            f"# cell {i}/{len(plan.cells)}: {label(spec, plan.cells)}",
            torchrun.spec_heredoc(spec, name),
        ]
        workers = [f"@WORKER{r}@" for r in range(spec.world_size)]
        for rank, env in enumerate(rank_envs(spec, workers, 29500, "@SCHEDULER@")):
            env = {k: v for k, v in env.items() if k not in ("GLOO_SOCKET_IFNAME", "GROUP_RANK")}
            env["MASTER_ADDR"] = "@ADDR@"
            text = (
                " ".join(f"{k}={v}" for k, v in env.items()) + " " + shlex.join(["python", *cell])
            )
            lines += [
                f"# rank {rank}: a task pinned to worker {rank} (workers sorted by address)",
                text.replace("@ADDR@", '"$WORKER0_HOST"').replace(
                    "@SCHEDULER@", '"$DASK_SCHEDULER_ADDRESS"'
                ),
            ]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
