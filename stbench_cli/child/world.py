"""What a world's ranks agree on while they train.

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
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class Vote:
    """The world's max of a host figure, one step late (at once in a world of one).

    Every rank must call it the same number of times, at the same steps, and `close()` it
    before the process group goes."""

    def __init__(self, needed: bool = True):
        # new_group is a collective: every rank makes the vote at the same point (Trainer.run),
        # and only a world that will vote (the same knobs on every rank) makes its group
        self.group = dist.new_group(backend="gloo") if needed and dist.is_initialized() else None
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
