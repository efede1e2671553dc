"""This rank's progress for the parent's stall watchdog (the record: store/progress.py).

The trainer names its phase and counts its steps on a `Heartbeat` in memory (an attribute set,
no file, no device synchronisation per step); a thread of its own writes the beat file when
something changed, at most every `period` seconds (0.5: a small file replaced at most twice a
second while the rank trains, which a shared file system of many ranks bears; the watchdog
reads once a second and its limits are tens of seconds). The same thread ends the rank when the
parent that launched it is gone (killed where it could not end its cells: SIGKILL), as no one
would read what it trains on for. A rank blocked in a collective or on
the device stops changing, which is what the parent watches for, and its last beat says where
it is. `close()` stops and joins the thread before the process leaves: nothing of it is alive
at exit. Without a folder (a cell run in a test's process) nothing is written.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from ..store.progress import PARENT_ENV, TIMELINE, Beat, parent_gone, write_beat

PARENT_S = 2.0  # how often a rank looks whether the parent that launched it is still there


class Heartbeat:
    def __init__(
        self, folder: Path | None = None, rank: int = 0, node: int = 0, period: float = 0.5
    ):
        self.folder, self.rank, self.node, self.period = folder, rank, node, period
        self.name = "starting"
        self.familiar = False  # in a phase it was in before
        # each phase seen, with when it was first entered (time.time()): where set-up time goes
        self.firsts: dict[str, float] = {self.name: time.time()}
        self.steps = self.work = 0
        self.per_epoch = self.total_steps = 0  # what training will take, once it begins
        self.slowest = 0.0
        self.done = False
        self._stop = threading.Event()
        self._thread = None
        if folder is not None:
            self._host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
            self._thread = threading.Thread(target=self._run, name="stbench-heartbeat", daemon=True)
            self._thread.start()

    def phase(self, name: str) -> None:
        """Entering a phase: a unit of work when it is another one than before."""
        if name != self.name:
            self.name = name
            self.work += 1
            self.familiar = name in self.firsts
            if not self.familiar:
                self.firsts[name] = time.time()

    def timeline(self, since: float) -> str:
        """Each phase's first entry, in seconds after `since` (the cell's launch): one line
        for the cell's log, saying where the seconds outside training went (on the H100 a cell
        spent ~9 s so, against ~2.5 s on the 2-core CPU machine)."""
        marks = ", ".join(
            f"{name} {t - since:.1f}" for name, t in [*self.firsts.items(), ("end", time.time())]
        )
        return f"{TIMELINE} {marks}"

    def step(self, seconds: float) -> None:
        """A training step ended after `seconds` (host time)."""
        self.steps += 1
        self.work += 1
        if seconds > self.slowest:
            self.slowest = seconds

    def planned(self, per_epoch: int, total_steps: int | None) -> None:
        """Training begins: its steps an epoch and in all (None: a time budget decides), so
        that a user watching a long cell sees how far it got (Beat.done_words)."""
        self.per_epoch, self.total_steps = per_epoch, total_steps or 0

    def tick(self) -> None:
        """A unit of work that is not a step (an evaluation batch)."""
        self.work += 1

    def beat(self) -> Beat:
        host = getattr(self, "_host", "")
        return Beat(
            self.rank,
            self.node,
            os.getpid(),
            host,
            self.name,
            self.steps,
            self.work,
            self.slowest,
            self.done,
            self.familiar,
            self.per_epoch,
            self.total_steps,
        )

    def _run(self) -> None:
        last, parent = None, os.environ.get(PARENT_ENV, "")
        looked = time.monotonic()
        while not self._stop.wait(self.period):
            now = self.beat()
            if now != last:
                write_beat(self.folder, now)
                last = now
            if parent and time.monotonic() - looked >= PARENT_S:
                looked = time.monotonic()
                if parent_gone(parent):  # no one will read this rank's rows: stop training
                    print(f"stbench: the parent ({parent}) is gone; ending", file=sys.stderr)
                    os.kill(os.getpid(), signal.SIGKILL)

    def close(self, phase: str = "left the world", done: bool = True) -> None:
        """The last beat (written here, at once), with the thread stopped and joined; `done`:
        the rank's training ended and it left the world (not so for a rank that failed)."""
        self.phase(phase)
        self.done = done
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            write_beat(self.folder, self.beat())
