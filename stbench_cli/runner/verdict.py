"""What ended a cell, in its row: which rank or node, how (exit code, signal, stall), and where.

A world's processes are watched together (watch.py); this turns what was seen into the row's
status and reason. The facts, in the order they are trusted:

- the first process the parent saw end non-zero: a torchrun agent (node i of a loopback world,
  or the one agent of a single node), the cell's own process, or an srun step;
- torchrun's failure summary in the log: each failed rank, its exit code or signal;
- `srun: error: HOST: task N: …`, Slurm's line naming the task (node) that failed a step;
- each rank's own failure (RESULT.rankR.json, rank 0's RESULT.json) and its last beat
  (store/progress.py): the phase it was in, whether it had left the world.

A rank that died without a word of its own (a signal, `os._exit`) caused what the others then
saw (a peer's closed connection), so it is named before them. A world that lost a rank after
its measurements were written keeps rank 0's figures, but its row is `failed` and says so.
"""

from __future__ import annotations

import re
import signal
from dataclasses import replace

from ..plan.spec import RunSpec
from ..store import progress
from ..store.cell_result import CellResult
from ..store.progress import Beat

_SUMMARY = re.compile(
    r"rank\s*: (\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*: (-?\d+) \(pid: \d+\)"
)
# Open MPI's mpirun on the rank that ended its job: a non-zero exit, or a signal
_MPI_EXIT = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(-?\d+)")
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
_SRUN = re.compile(r"^srun: error: (\S+): tasks? (\d+): (.+)$", re.MULTILINE)
_TORCHRUN_EXIT = re.compile(r"torchrun on node (\d+) exited with code (-?\d+)")  # slurm.run_node
# a line of torchrun's agent (its logger, its summary, its own traceback), not of a rank
_AGENT = re.compile(
    r"^([IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ .*torch/distributed/|USDT:|\[[IWE]\d{4} )"
)
_AGENT_FAILED = re.compile(
    r"failed \(exitcode: |ChildFailedError|^srun: error: "
    r"|^Primary job +terminated|^mpirun (noticed|detected)",
    re.MULTILINE,
)
# what a process that dies of a signal prints last (the C++ runtime, glibc, Python's faulthandler)
_FATAL = re.compile(
    r"^(terminate called.*|Fatal Python error: .*|Segmentation fault.*|\*\*\* .*"
    r"|.*(double free|corrupted|core dumped).*)$",
    re.MULTILINE,
)
# what a rank says when a peer went away: a consequence, not a cause
_PEER_LOST = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "socket closed",
    "remote process exited",
    "ncclremoteerror",
)


def how(code: int, rank: bool = True) -> str:
    """An exit code as words: a signal by name (a negative code, or a shell's 128 + N); a
    rank's SIGKILL with the OOM killer's name (`rank`: not a launcher's process)."""
    if code < 0 or 128 < code < 160:
        number = -code if code < 0 else code - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        why = f"killed by signal {number} ({name}"
        oom = rank and number == signal.SIGKILL
        return why + (": the kernel's OOM killer sends this)" if oom else ")")
    return f"exited with code {code}"


def rank_exits(log: str) -> dict[int, int]:
    """Rank -> exit code of every failed rank torchrun's agents (or mpirun) reported, first
    report first (a signal as a negative code)."""
    out: dict[int, int] = {}
    for rank, code in _SUMMARY.findall(log) + _MPI_EXIT.findall(log):
        out.setdefault(int(rank), int(code))
    for rank, number in _MPI_SIGNAL.findall(log):
        out.setdefault(int(rank), -int(number))
    return out


def srun_tasks(log: str) -> list[tuple[str, int, str]]:
    """(host, task, what) of each `srun: error:` line: the task (node) that failed the step."""
    return [(host, int(task), what.strip()) for host, task, what in _SRUN.findall(log)]


def last_words(log: str) -> str:
    """The last line a rank printed before any agent reported a failure, torchrun's own lines
    left out (the one log holds every rank's and agent's output; a rank that died of a signal
    printed last what killed it, e.g. `terminate called without an active exception`)."""
    cut = _AGENT_FAILED.search(log)
    head = log[: cut.start()] if cut else log
    lines = [
        ln.strip()
        for ln in head.splitlines()
        if ln.strip() and not _AGENT.match(ln.strip()) and progress.TIMELINE not in ln
    ]
    errors = [ln for ln in lines if "Error" in ln or "error" in ln] if not cut else []
    return (errors or lines or [""])[-1][:300]


def fatal_line(log: str) -> str:
    """The first line a process dying of a signal printed (in a world's shared log, the rank
    that died of one said it: the others were ended by the parent, or saw their peer go)."""
    found = _FATAL.search(log)
    return found.group(0).strip()[:300] if found else ""


def node_of(spec: RunSpec, rank: int, beats: dict[int, Beat]) -> int:
    """A rank's node: from its beat, else torchrun's static layout (ranks in node order)."""
    return beats[rank].node if rank in beats else rank // max(spec.nproc_per_node, 1)


def rank_words(spec: RunSpec, rank: int, beats: dict[int, Beat], places=None) -> str:
    """A rank with where it ran: its node, or `places[rank]` where the launcher knows better
    (a Dask rank's worker)."""
    if spec.world_size == 1:
        return "the cell"
    return f"rank {rank} ({(places or {}).get(rank) or f'node {node_of(spec, rank, beats)}'})"


def when(rank: int, beats: dict[int, Beat]) -> str:
    """Where a rank was, from its last beat."""
    beat = beats.get(rank)
    if beat is None:
        return "before it reported any progress"
    if beat.done:
        return "after it left the world, its training over"
    return f"in {beat.phase}, after {beat.steps} steps"


def lost_peer(result: CellResult) -> bool:
    return any(m in result.reason.lower() for m in _PEER_LOST)


def _on_node(spec: RunSpec, node: int, beats: dict[int, Beat]) -> str:
    """Where the ranks of a node were, from their beats: " (rank 1 in …)"."""
    ranks = [r for r in range(spec.world_size) if node_of(spec, r, beats) == node and r in beats]
    where = "; ".join(f"rank {r} {when(r, beats)}" for r in ranks)
    return f" ({where})" if where else ""


def _node_lost(spec: RunSpec, node: int, code: int, beats: dict[int, Beat]) -> str:
    return f"node {node} lost: its torchrun agent was {how(code, rank=False)}" + _on_node(
        spec, node, beats
    )


def _abrupt(exits: dict[int, int], results: dict[int, CellResult]) -> list[int]:
    """Ranks that ended non-zero without a failure of their own on record: killed by a signal,
    `os._exit`, an abort (rank 0 may have written its figures first)."""
    return [
        r
        for r, code in exits.items()
        if code != 0 and (r not in results or results[r].status == "ok")
    ]


def _own_failure(
    spec: RunSpec, results: dict[int, CellResult], beats, peers: bool = True, places=None
) -> tuple[str, str] | None:
    """The status and reason of the rank that failed first of its own accord: one whose error
    is not a lost peer, rank 0 first (`peers`: else one that lost its peer); a reason not rank
    0's names its rank."""
    own = [r for r in sorted(results) if results[r].status != "ok"]
    first = ([r for r in own if not lost_peer(results[r])] or (own if peers else []) or [None])[0]
    if first is None:
        return None
    reason = results[first].reason
    if first != 0:
        reason = f"{rank_words(spec, first, beats, places)}: {reason}"
    return results[first].status, reason


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def slurm_task(log: str) -> str:
    """The task (node) whose end ended a Slurm step, as srun said it, and how its torchrun
    agent ended where the task's own wrapper said (slurm.run_node)."""
    tasks = srun_tasks(log)
    if not tasks:
        return ""
    host, task, what = tasks[0]
    agents = {int(n): int(c) for n, c in _TORCHRUN_EXIT.findall(log)}
    agent = f" (its torchrun agent {how(agents[task], rank=False)})" if agents.get(task) else ""
    return f"node {task} ({host}): Slurm's task {what}{agent}"


def cause(
    spec: RunSpec,
    first: tuple[int, int, str],
    log: str,
    results: dict[int, CellResult],
    beats: dict[int, Beat],
    exits: dict[int, int] | None = None,
    places: dict[int, str] | None = None,
) -> tuple[str, str]:
    """(status, reason) of a cell whose process `first` = (index, code, role) ended non-zero
    first. role: "agent" (torchrun's agent of node `index`), "cell" (the rank itself), "rank"
    (rank `index` itself, a Dask task's process), "step" (an srun step of every node),
    "mpirun" (Open MPI's mpirun of every rank), "job" (a Slurm job). `exits`: each rank's exit
    code where the launcher saw every rank's (Dask), else torchrun's or mpirun's report;
    `places`: where each rank ran, in words, where the launcher knows (a Dask worker)."""
    index, code, role = first
    if role == "agent" and code < 0:
        return "failed", _node_lost(spec, index, code, beats)
    exits = exits or rank_exits(log) or ({index: code} if role in ("cell", "rank") else {})
    task = slurm_task(log)
    abrupt = _abrupt(exits, results)
    if any(r.status != "ok" for r in results.values()):
        # torchrun's agent ends a failed rank's peers with SIGTERM: a consequence, not a cause
        abrupt = [r for r in abrupt if exits[r] != -signal.SIGTERM]
    if abrupt:  # a world's shared log: only a fatal signal's words are surely the rank's
        rank, world = abrupt[0], spec.world_size > 1
        said = f"{how(exits[rank])} {when(rank, beats)}"
        words = fatal_line(log) if world else last_words(log)
        last = f"{'its last words' if world else 'last log line'}: {words}" if words else ""
        who = f"{rank_words(spec, rank, beats, places)} " if world else ""
        return "failed", _join(task, f"{who}{said}", last)
    own = _own_failure(spec, results, beats, not task, places)  # a task's end cut them off
    if own is not None:
        return own[0], _join(task, own[1])
    if task:
        node = srun_tasks(log)[0][1]
        return "failed", task + _on_node(spec, node, beats)
    by = {
        "agent": f"node {index}'s torchrun agent ",
        "step": "the srun step ",
        "mpirun": "mpirun ",
    }.get(role, "")
    return "failed", _join(
        task, f"{by}{how(code, rank=role in ('cell', 'rank'))}" if code else "", last_words(log)
    )


def cell_outcome(
    spec: RunSpec,
    first: tuple[int, int, str] | None,
    log: str,
    results: dict[int, CellResult],
    beats: dict[int, Beat],
    exits: dict[int, int] | None = None,
    places: dict[int, str] | None = None,
) -> CellResult:
    """The cell's result: rank 0's when every process ended well; else what went wrong first,
    with rank 0's figures kept when it had written them (the row is not ok all the same).
    `exits`, `places`: as `cause` takes them."""
    written = results.get(0)
    if first is None:
        return written or CellResult(
            "failed", _join("every process exited 0, but rank 0 wrote no result", last_words(log))
        )
    status, reason = cause(spec, first, log, results, beats, exits, places)
    if written is not None and written.status == "ok":
        return replace(written, status=status, reason=f"{reason} (rank 0's figures kept)")
    return CellResult(status, reason)


def hung(
    spec: RunSpec,
    idle_s: float,
    limit_s: float,
    user: float | None,
    beats: dict[int, Beat],
    places: dict[int, str] | None = None,
) -> CellResult:
    """The row of a cell the stall watchdog killed: how long nothing moved, the limit and why,
    and where every rank stopped (a rank with no beat never started, or never reached its
    first phase: it never joined)."""
    if user:
        rule = f"--stall-limit {user:g} s"
    else:
        slowest = max((b.slowest_s for b in beats.values()), default=0.0)
        familiar = len(beats) >= spec.world_size and all(b.familiar for b in beats.values())
        least = (
            f"{progress.STALL_RUN_S:g} s in phases the ranks were in before"
            if familiar
            else f"{progress.STALL_FLOOR_S:g} s while a rank is in a phase new to it"
        )
        steps = f"{progress.STALL_STEPS} x the slowest step ({slowest:.3g} s), " if slowest else ""
        rule = f"{steps}at least {least}"
    where = []
    for rank in range(spec.world_size):
        said = when(rank, beats) if rank in beats else "never reported: it never started or joined"
        where.append(f"{rank_words(spec, rank, beats, places)} {said}")
    if not beats and spec.nodes > 1:  # torchrun's agents wait in their rendezvous for every node
        where = ["no rank started: a node's torchrun agent never joined the rendezvous"]
    return CellResult(
        "hung",
        f"no progress for {idle_s:.0f} s (limit {limit_s:.0f} s: {rule}); "
        f"killed; {'; '.join(where)}",
    )
