"""A cell's processes watched together, the way `srun --kill-on-bad-exit` watches a step's tasks.

Every POLL_S the parent looks at all of a cell's processes at once, never at one after another:

- the first to end non-zero ends the world: the others get GRACE_S to say what they saw
  (torchrun's agents print which rank failed and how, a failing rank writes its error), then
  every process of the cell is killed, on every node, orphans included (a torchrun agent
  killed on its own leaves its ranks running: they are found by the spec file they name);
- a cell past `--timeout` is killed, as before;
- a cell whose ranks finish no unit of work for its stall limit (store/progress.py) is killed
  as hung, with every rank's last beat to say where it stopped.

Without this, one node's agent that exited left the others at torchrun's exit barrier (300 s),
in gloo's 30-minute timeout, or waiting forever.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..store.progress import Beat, read_beats, stall_limit

POLL_S = 0.2  # how often the parent looks at the processes (a waitpid each, no more)
GRACE_S = 3.0  # after the first failure, how long the others get to report theirs
BEATS_S = 1.0  # how often it reads the ranks' beats


@dataclass(frozen=True)
class Stall:
    idle_s: float  # seconds in which no rank finished a unit of work
    limit_s: float
    beats: dict = field(default_factory=dict)  # rank -> Beat, the last of each


@dataclass(frozen=True)
class Ending:
    """What ended a cell's processes; clean when each ended by itself with 0."""

    first: tuple[int, int] | None = None  # (index, return code) of the first to end non-zero
    timed_out: bool = False
    stall: Stall | None = None

    @property
    def clean(self) -> bool:
        return self.first is None and not self.timed_out and self.stall is None


class Stalls:
    """How long a cell's ranks have finished nothing, from their beat files."""

    def __init__(self, folder: Path, user_limit: float | None, world: int = 1):
        self.folder, self.user, self.world = folder, user_limit, world
        self.work, self.since = -1, time.monotonic()
        self.beats: dict[int, Beat] = {}

    def look(self, now: float) -> Stall | None:
        self.beats = read_beats(self.folder)
        work = sum(b.work for b in self.beats.values())
        if work != self.work:
            self.work, self.since = work, now
        limit = stall_limit(self.user, self.beats, self.world)
        idle = now - self.since
        return Stall(idle, limit, dict(self.beats)) if idle > limit else None


def watch(procs: list, timeout: float | None, stalls: Stalls | None) -> Ending:
    """Wait until every process ended, or one failed (and the others had GRACE_S), or the
    cell's time ran out, or it stalled; kill nothing (the caller does)."""
    start = look_at = time.monotonic()
    first, failed_at = None, 0.0
    while True:
        now = time.monotonic()
        codes = [p.poll() for p in procs]
        if first is None and any(codes):
            first, failed_at = next((i, c) for i, c in enumerate(codes) if c), now
        if all(c is not None for c in codes) or (first and now - failed_at >= GRACE_S):
            return Ending(first)
        if timeout is not None and now - start >= timeout:
            return Ending(first, timed_out=True)
        if stalls is not None and now >= look_at:
            look_at = now + BEATS_S
            stall = stalls.look(now)
            if stall is not None:
                return Ending(first, stall=stall)
        time.sleep(POLL_S)


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
            root = psutil.Process(pid)  # itself too: a forked cell may not lead its group yet
            procs += [root, *root.children(recursive=True)]
        except psutil.Error:
            pass
    if grace > 0:
        _signal_all(procs, pids[0], signal.SIGTERM)
        psutil.wait_procs([p for p in procs if p.is_running()], timeout=grace)
    _signal_all(procs, pids[0], signal.SIGKILL)


def sweep(spec_path: Path) -> None:
    """Kill every process of this machine that names the cell's spec file, until none is left:
    torchrun starts each rank in a session of its own, and an agent killed on its own leaves
    its ranks to init, so neither the group nor the tree holds them all (the study folder has
    one owner at a time, so each such process is this cell's)."""
    for _ in range(10):  # again: a dying agent may have been starting a rank
        found = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                # (an srun's names it inside its bash -c)
                if str(spec_path) in " ".join(p.info["cmdline"] or []):
                    p.kill()
                    found.append(p)
            except psutil.Error:
                pass
        if not found:
            return
        psutil.wait_procs(found, timeout=5)


def started(pids: list[int]) -> list[float | None]:
    """Each process's start time, which tells it from a later process given the same pid."""
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid).create_time())
        except psutil.Error:
            out.append(None)
    return out


def kill_leftovers(work: Path, spec_path: Path) -> None:
    """An earlier parent of this study died (SIGKILL) while this cell ran here: what it started
    may still run, torchrun's ranks included. Swept before this attempt starts; a forked cell
    (warm.py), whose command line names no spec file, by its pid and start time."""
    try:
        old = json.loads((work / "group.json").read_text())
    except (OSError, ValueError):
        return
    if old.get("host") != socket.gethostname():
        return
    alive = [
        pid
        for pid, at in zip(old.get("pids", []), old.get("started", []))
        if at is not None and started([pid]) == [at]
    ]
    if alive:
        kill_group(alive)
    sweep(spec_path)
