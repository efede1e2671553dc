"""What a world's ranks agree on while they train, and what each keeps of its own.

Stopping (a time budget spent, an evaluation due by the clock) must happen at the same step on
every rank, or the ranks that go on hang in a collective. Agreeing on a fresh figure after every
step (an all-reduce read back at once) is a host wait per step that only worlds of two or more
pay: on CUDA it drains the launch queue, so overlap is lost and speedup and efficiency read low.

`Vote` agrees a step late instead. After step k each rank launches an asynchronous all-reduce
(max) of its figure and reads the result of the one it launched after step k-1; every rank
reads the same agreed figure at the same step, so all decide alike, and the run stops one step
after the step that spent its budget. The figure is host time, so it travels as a host tensor on
a gloo group of its own (in an NCCL world too): the device never sees it, and the wait, on a
collective every rank posted a whole step ago, finds it done (or waits on a slower rank's host,
never on a device).

Each rank's own phase totals are gathered once, at the run's end (`rank_rows`). The row reports
the slowest rank's (the most step time), every phase of that one rank, so they sum to its step
time; a maximum taken phase by phase would add one rank's wait to another's compute. DDP's own
communication figures are that rank's too, so sync_s is held against its own rank's. Every
rank's totals go to ranks.csv, where a reader sees which rank waited, and in which phase.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta

import torch
import torch.distributed as dist

from ..device import Accelerator
from ..store.cell_result import EpochRow, RankRow
from ..store.rows import PHASE_COLUMNS

TOTALS = (*PHASE_COLUMNS, "train_s", "data_wait_s")  # a rank's figures summed over its intervals


class Vote:
    """The world's max of a host figure, one step late (at once in a world of one).

    Every rank must call it the same number of times, at the same steps, and `close()` it
    before the process group goes."""

    def __init__(self, needed: bool = True, timeout_s: float | None = None):
        # new_group is a collective: every rank makes the vote at the same point (Trainer.run),
        # and only a world that will vote (the same knobs on every rank) makes its group, with
        # the world's timeout (a new group's default is torch's 30 minutes, not the world's)
        self.group = None
        if needed and dist.is_initialized():
            timeout = timedelta(seconds=timeout_s) if timeout_s else None
            self.group = dist.new_group(backend="gloo", timeout=timeout)
        self.pending = None  # (work, tensor) of the last step's all-reduce

    def __call__(self, value: float) -> float:
        """Post this step's figure; the world's figure of the previous step (0.0 before any)."""
        if self.group is None:
            return value
        agreed = self.close()
        t = torch.tensor([value], dtype=torch.float64)
        self.pending = dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group, async_op=True), t
        return agreed

    def close(self) -> float:
        """Read the pending all-reduce (launched a step ago); 0.0 when none is pending."""
        if self.pending is None:
            return 0.0
        (work, t), self.pending = self.pending, None
        work.wait()
        return float(t[0])  # a host tensor: no device to wait for


def distinct_gpus(uuids) -> int | None:
    """How many GPUs a world's ranks ran on: the distinct UUIDs they reported (gloo ranks of
    emulated nodes may all sit on one GPU, and count it once); None where none reported one
    (CPU)."""
    seen = {str(u).lower().removeprefix("gpu-") for u in uuids if u}
    return len(seen) or None


def rank_rows(
    epochs: list[EpochRow],
    run_id: str,
    rank: int,
    steps: int,
    wall: float,
    accel: Accelerator,
    comm: tuple,
) -> tuple[tuple[RankRow, ...], RankRow]:
    """(every rank's row in rank order, the slowest rank's row): this rank's totals over its
    evaluation intervals, its peak, its GPU and DDP's (communication, exposed communication),
    gathered from every rank (a collective: every rank calls it once)."""
    totals = {c: sum(getattr(e, c) for e in epochs) for c in TOTALS}
    peak = accel.peak_bytes()
    mine = RankRow(
        run_id,
        rank,
        False,
        int(os.environ.get("GROUP_RANK", "0")),
        steps,
        wall_s=wall,
        peak_gpu_mb=peak / 2**20 if peak is not None else None,
        gpu_uuid=accel.uuid(),
        ddp_comm_s=comm[0],
        ddp_exposed_comm_s=comm[1],
        **totals,
    )
    everyone = [mine]
    if dist.is_initialized():
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
    # of equals, the lowest rank
    slowest = max(range(len(everyone)), key=lambda i: everyone[i].train_s)
    rows = tuple(replace(r, reported=i == slowest) for i, r in enumerate(everyone))
    return rows, rows[slowest]
