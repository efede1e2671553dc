"""The evaluation pass of the trainer: the validation metric at each evaluation point.

A mixin of `Trainer` (trainer.py), which holds the task, the model and the loaders; every rank
runs as many forwards as the others (fsdp's are collectives) and the metric's sums are reduced
over the world once, at the end. Each batch is a unit of work for the stall watchdog.
"""

from __future__ import annotations

import torch

from . import ddp
from .loader import eval_limit


class Evaluator:
    """evaluate(): the validation metric of the trainer's model, over every rank."""

    @torch.no_grad()
    def evaluate(self) -> float:
        metric, limit = self.task.metric, eval_limit(self.cfg.knobs, self.cfg.batch_size)
        self.progress.phase("an evaluation's forward passes")
        self.model.eval()
        # error, count: read once, at the end
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        last = self.last_batch  # an empty shard repeats the last training batch
        for batch in self._eval_batches(limit):
            self.progress.tick()
            if batch is None:  # fsdp: an extra forward (its all-gathers) to match the other ranks
                self._predict(*last)
                continue
            last = x, y = self.transfer(*batch, self.device)
            sums[0] += metric.sum(self._predict(x, y), y).double()
            sums[1] += metric.count(y) if metric.count else len(y)
        self.model.train()
        self.progress.phase("an evaluation's metric (its all-reduce)")
        total_all, count_all = ddp.reduce(sums.tolist(), self.device, "sum")
        return metric.finish(total_all, count_all)

    def _predict(self, x, y):
        with self.accel.autocast(self.cfg.knobs.precision):
            pred = self.task.model.predict(self.model, x, y)
        return pred.float() if torch.is_tensor(pred) else pred  # the metric in fp32 whatever ran

    def _eval_batches(self, limit: int | None):
        """This rank's validation batches; under fsdp every forward is a collective, so a rank
        with fewer batches (uneven shards) follows with `None`s until every rank has run as many
        forwards as the one with most (their outputs are not counted)."""
        mine = len(self.val_loader) if not limit else min(limit, len(self.val_loader))
        # agreed before any forward: a collective inside the loop would pair with a forward's
        fsdp = self.cfg.strategy == "fsdp"
        most = int(ddp.reduce([float(mine)], self.device)[0]) if fsdp else mine
        for i, batch in enumerate(self.val_loader):
            if i >= mine:
                break
            yield batch
        yield from [None] * (most - mine)
