"""A rank's progress, as the parent's stall watchdog reads it: one small JSON file per rank.

Each rank of a cell writes `beat.rank<R>.json` into the cell's work folder (`.cells/<run_id>/`,
on the shared file system under Slurm) from a thread of its own (child/heartbeat.py), whenever
something changed, at most twice a second: how many units of work it finished (training
steps, evaluation batches, phases of its set-up), its slowest training step so far (host
seconds: no device synchronisation), and the phase it is in, named for what it waits on (a
collective, the data, the device). The parent (runner/watch.py) kills a cell whose ranks finish
nothing for its stall limit and names, from the last beats, where each rank stopped. Torch-free.

The limit is the user's (`--stall-limit`), else derived from the cell's own progress: STALL_STEPS
times its slowest step, and at least STALL_RUN_S while every rank is in a phase it was in before
(a step, an evaluation batch), or STALL_FLOOR_S while one is in a phase new to it (set-up, data
generation, compilation, the first evaluation: they finish no step and may take minutes). A
collective's own timeout (every process group's) is the floor plus a margin, so that the parent,
which sees every rank, acts first, and a rank blocked in a collective with no parent watching (a
command run by hand) still fails with a message rather than sitting forever.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

STALL_FLOOR_S = 300.0  # a phase new to a rank (set-up, compilation): a few minutes
STALL_RUN_S = 30.0  # a phase it was in before (a step, an evaluation batch): half a minute
STALL_STEPS = 10  # a stalled world finished nothing for this many times its slowest step
# the line a finished cell's rank 0 ends its log with (child/heartbeat.py), which a failure's
# last words skip (runner/verdict.py): it says where the set-up time went, not what went wrong
TIMELINE = "stbench: phases first entered, seconds after the parent launched the cell:"
# when the parent launched a cell's processes (time.time()), in their environment: the zero of
# the cell's timeline, exact where a process's own start time has a second's resolution
LAUNCHED_ENV = "STBENCH_LAUNCHED"
# who launched a cell: "host pid start-time" of the parent stbench process, for its ranks to end
# themselves should it die without ending them (SIGKILL: the OOM killer, Slurm's after its
# SIGTERM); a rank on another host (srun, mpirun) cannot tell, and ignores it
PARENT_ENV = "STBENCH_PARENT"
PG_MARGIN_S = 60.0  # a process group's timeout: the limit's floor and this margin


@dataclass(frozen=True)
class Beat:
    """One rank's progress, as it last wrote it."""

    rank: int
    node: int  # torchrun's node (agent) rank
    pid: int
    host: str
    phase: str  # what it is doing now, e.g. "step 12: backward (DDP's gradient all-reduce)"
    steps: int = 0  # training steps finished
    work: int = 0  # units of work finished: steps, evaluation batches, phases
    slowest_s: float = 0.0  # its slowest training step so far (host seconds)
    done: bool = False  # it left the world: training over, every process group destroyed
    familiar: bool = False  # it was in this phase before (a step, an evaluation batch)
    per_epoch: int = 0  # training steps an epoch (0: training has not begun)
    total_steps: int = 0  # training steps the run will take (0: a time budget decides)

    def where(self) -> str:
        return f"rank {self.rank} (node {self.node}, pid {self.pid}) in {self.phase}"

    def done_words(self) -> str:
        """How far its training got, for a user watching a long cell: 'epoch 4/15 (23%)',
        'epoch 4' where a time budget decides the end, '' before the first step."""
        if not self.per_epoch or not self.steps:
            return ""
        epoch = self.steps // self.per_epoch + 1  # the step running now is in this epoch
        if not self.total_steps:
            return f"epoch {epoch}"
        epochs = -(-self.total_steps // self.per_epoch)
        share = min(self.steps / self.total_steps, 1.0)  # the memory figures' step: one more
        return f"epoch {min(epoch, epochs)}/{epochs} ({share:.0%})"


def cell_work(study: Path, run_id: str) -> Path:
    """A cell's scratch folder in its study: its spec, its result and its ranks' beats (on the
    shared file system under Slurm)."""
    return study / ".cells" / run_id


def beat_path(folder: Path, rank: int) -> Path:
    return folder / f"beat.rank{rank}.json"


def write_beat(folder: Path, beat: Beat) -> None:
    """Replace the rank's beat file (a rename: the parent never reads half of one). No fsync:
    a beat lost to a crash only makes the watchdog wait a little longer."""
    path = beat_path(folder, beat.rank)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(asdict(beat)))
        os.replace(tmp, path)
    except OSError:  # a full disk: never stop a rank for its beat
        tmp.unlink(missing_ok=True)


def parent_mark() -> str:
    """This process, as a cell's ranks find it again (PARENT_ENV): its host, pid and start."""
    import psutil

    return f"{socket.gethostname()} {os.getpid()} {psutil.Process().create_time():.2f}"


def launch_env(launched: float) -> dict[str, str]:
    """What a launched cell's (or windows process's) environment gets from its parent: the
    timeline's zero (`launched`, time.time()) and the parent's mark."""
    return {LAUNCHED_ENV: f"{launched:.3f}", PARENT_ENV: parent_mark()}


def parent_gone(mark: str) -> bool:
    """Whether the process `mark` names is gone from this host (a pid taken again by another
    process is gone too); False where it ran on another host, or the mark is not one."""
    import psutil

    try:
        host, pid, start = mark.split()
        if host != socket.gethostname():
            return False
        return f"{psutil.Process(int(pid)).create_time():.2f}" != start
    except ValueError:
        return False
    except psutil.Error:  # no such process
        return True


def parent_pid(mark: str) -> int | None:
    """The pid of the process `mark` names where it runs on this host; None elsewhere."""
    try:
        host, pid, _ = mark.split()
    except ValueError:
        return None
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def read_beats(folder: Path) -> dict[int, Beat]:
    """Every rank's last beat, by rank (one being replaced right now is read at the next look)."""
    out = {}
    for path in folder.glob("beat.rank*.json"):
        try:
            beat = Beat(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        out[beat.rank] = beat
    return out


def stall_limit(user: float | None, beats: dict[int, Beat], world: int) -> float:
    """Seconds a cell may finish no unit of work: the user's, else derived from its progress;
    the floor while a rank is in a phase new to it, or has not reported yet."""
    if user:
        return user
    slowest = max((b.slowest_s for b in beats.values()), default=0.0)
    familiar = len(beats) >= world and all(b.familiar for b in beats.values())
    return max(STALL_RUN_S if familiar else STALL_FLOOR_S, STALL_STEPS * slowest)


def pg_timeout(user: float | None) -> float:
    """Every process group's timeout (gloo and NCCL): a collective blocked this long fails."""
    return (user or STALL_FLOOR_S) + PG_MARGIN_S
