"""How many intra-op threads a cell's process runs (the `threads` knob). Pure.

N > 0 is exactly N. 0 (auto, the default) is the physical cores not busy with other processes
when the cell starts, shared by the cell's ranks on this machine, at least one each:

- physical cores, not logical ones, as PyTorch's own CPU launcher does
  (torch/backends/xeon/run_cpu.py): two threads on one core's hyperthreads share its units;
- less the busy ones: an OpenMP team waits at every parallel region's end for its slowest
  thread, and a thread that shares its core with another busy process loses whole time slices.
  On the 2-core VM, sparse STNN at 60x168 fell from 573 to 22.5 steps/s with torch's 2 threads
  beside one busy core, and kept 468 with 1 thread (benchmarks/contention.py measures it).

The row records the count (`threads`), this choice's reason in words (`threads_why`) and its
facts as columns a reader needs no words for: the physical cores auto counted
(`threads_physical`) and whether it left busy cores out (`threads_for_load`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

BUSY_ROUND = 0.5  # other processes' use of at least half a core counts as a busy core
# the parent's choice, as the environment of the cell's processes carries it to them (JSON)
THREADS_ENV = "STBENCH_THREADS"


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    why: str  # in words, for a person
    physical: int | None = None  # auto: the physical cores it counted (None: threads given)
    for_load: bool = False  # auto left cores out that other processes kept busy

    def env(self) -> dict[str, str]:
        return {THREADS_ENV: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ThreadChoice | None:
        """The parent's choice, None where it made none (a Slurm node's ranks choose their own)."""
        try:
            return cls(**json.loads(environ[THREADS_ENV]))
        except (KeyError, TypeError, ValueError):
            return None

    def row(self) -> dict[str, object]:
        """The row's columns of this choice (store.cell_result.Figures)."""
        return {
            "threads_why": self.why,
            "threads_physical": self.physical,
            "threads_for_load": self.for_load,
        }


def busy_cores(others_cores: float, physical: int) -> int:
    """Other processes' use (in cores) as whole busy cores, at most every core."""
    return min(max(math.floor(others_cores + 1 - BUSY_ROUND), 0), physical)


def choose(
    asked: int, physical: int, others_cores: float | None, ranks: int = 1, window_s: float = 0.0
) -> ThreadChoice:
    """The threads of each rank: `asked` where given, else auto. `others_cores`: the other
    processes' CPU use in cores over `window_s` before the cell (None: not checked, e.g. a
    Slurm node the parent is not on); `ranks`: the cell's processes on this machine."""
    if asked > 0:
        return ThreadChoice(asked, f"threads={asked} given")
    physical, ranks = max(physical, 1), max(ranks, 1)
    each = f", shared by {ranks} ranks" if ranks > 1 else ""
    if others_cores is None:
        n = max(physical // ranks, 1)
        return ThreadChoice(
            n,
            f"auto: {physical} physical cores{each}; the machine's load was "
            "not checked before the cell",
            physical,
        )
    busy = busy_cores(others_cores, physical)
    n = max((physical - busy) // ranks, 1)
    seen = f"other processes used {others_cores:.2f} cores over {window_s:g} s before the cell"
    if not busy:
        return ThreadChoice(
            n, f"auto: {physical} physical cores{each}, none busy ({seen})", physical
        )
    return ThreadChoice(
        n,
        f"auto: {physical} physical cores less {busy} busy{each}, at least 1 ({seen})",
        physical,
        for_load=True,
    )
