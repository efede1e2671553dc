"""The one training loop every workload runs under, instrumented by phase.

    data    host waits for the next batch from the loader
    h2d     batch moved to the device (non_blocking from pinned memory)
    compute forward + backward + optimizer step (minus exposed sync)
    sync    gradient communication the step waited for (DDP only; see ddp.py)
    eval    validation pass at the end of each epoch

The first `warmup_steps` steps count in wall time but not in steady-state samples/s.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, SequentialSampler, Subset

from . import ddp
from .timing import PHASES, Clock, StepMarks, resolve


@dataclass(frozen=True)
class LoopConfig:
    """The trainer's knobs, taken from a cell's spec and its common parameters."""

    batch_size: int
    epochs: int
    lr: float
    lr_scaling: str = "none"
    lr_warmup_steps: int = 0
    warmup_steps: int = 5
    workers: int = 0
    loader: str = "vectorized"
    max_steps: int = 0
    max_eval_batches: int = 0
    seed: int = 0

    @classmethod
    def from_spec(cls, spec) -> "LoopConfig":
        p = spec.param_dict
        keys = ("lr", "lr_scaling", "lr_warmup_steps", "warmup_steps", "workers", "loader", "max_steps", "max_eval_batches")
        return cls(batch_size=spec.batch_size, epochs=spec.epochs, seed=spec.seed, **{k: p[k] for k in keys})


def make_loader(dataset, cfg: LoopConfig, sampler, pin: bool, batch_size: int | None = None,
                batched: bool = False) -> DataLoader:
    """`vectorized` hands the dataset a whole list of indices (one tensor gather per batch);
    `per-item` indexes sample by sample and collates in Python, as most hand-written loops do.
    `batched`: the sampler already yields whole batches (a workload's own epoch order)."""
    size = batch_size or cfg.batch_size
    drop_last = isinstance(sampler, DistributedSampler)  # constant train batches: honest throughput
    common = dict(num_workers=cfg.workers, pin_memory=pin, persistent_workers=cfg.workers > 0)
    if batched:
        return DataLoader(dataset, sampler=sampler, batch_size=None, **common)
    if cfg.loader == "vectorized":
        return DataLoader(dataset, sampler=BatchSampler(sampler, size, drop_last), batch_size=None, **common)
    return DataLoader(dataset, batch_size=size, sampler=sampler, drop_last=drop_last, **common)


def scaled_lr(cfg: LoopConfig, world_size: int) -> float:
    factor = {"none": 1.0, "linear": float(world_size), "sqrt": math.sqrt(world_size)}[cfg.lr_scaling]
    return cfg.lr * factor


def flops_per_sample(forward, loss_fn, x: torch.Tensor, y: torch.Tensor, model: torch.nn.Module) -> float:
    """Forward + backward FLOPs of one batch, per sample (torch's own operator counter;
    it counts dense matrix products, not sparse ones)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        loss_fn(forward(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / len(x)


def _to(batch, device: torch.device):
    return [t.to(device, non_blocking=True) for t in batch]


class Trainer:
    """Runs one cell's training on one process (one rank of a DDP world)."""

    def __init__(self, task, cfg: LoopConfig, device: torch.device, rank: int = 0, world_size: int = 1,
                 step_hook=None):
        self.task, self.cfg, self.device = task, cfg, device
        self.step_hook = step_hook  # called after every training step (the profiler's clock)
        self.rank, self.world = rank, world_size
        self.clock = Clock(device)
        train, val = task.train, task.val
        if task.data_on_device:  # batches are sliced where the data lives: no copies, no h2d
            train, val = train.to(device), val.to(device)
            cfg = self.cfg = dataclasses.replace(cfg, workers=0)
        pin = device.type == "cuda" and not task.data_on_device
        if task.batch_sampler is not None:  # the workload orders its own epoch (single process)
            self.sampler = task.batch_sampler(cfg.batch_size, cfg.seed, cfg.max_steps)
            self.train_loader = make_loader(train, cfg, self.sampler, pin, batched=True)
        else:
            shards = (1, 0) if task.sharded else (world_size, rank)
            self.sampler = DistributedSampler(train, *shards, shuffle=True, seed=cfg.seed, drop_last=True)
            self.train_loader = make_loader(train, cfg, self.sampler, pin)
        val_part = Subset(val, range(rank, len(val), world_size))
        self.val_loader = make_loader(val_part, cfg, SequentialSampler(val_part), pin)
        if len(self.train_loader) == 0:
            raise ValueError(
                f"batch size {cfg.batch_size} x {world_size} process(es) exceeds the {len(task.train)} training samples"
            )
        model = task.model.to(device)
        x, y = _to(next(iter(self.train_loader)), device)
        self.flops_per_sample = task.flops_per_sample or flops_per_sample(
            lambda v: task.forward(model, v, y, 0), task.loss_fn, x, y, model)
        self.probe = ddp.SyncProbe(self.clock)
        self.model = ddp.wrap(model, device, self.probe) if world_size > 1 else model
        self.optimizer = task.optimizer(self.model.parameters(), lr=scaled_lr(cfg, world_size))
        self.global_step = 0
        warm = max(cfg.lr_warmup_steps, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warm))

    def _step(self, it) -> tuple[StepMarks, torch.Tensor]:
        start = self.clock.mark()
        x, y = next(it)
        data = self.clock.mark()
        x, y = _to((x, y), self.device)
        h2d = self.clock.mark()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.task.loss_fn(self.task.forward(self.model, x, y, self.global_step), y)
        loss.backward()
        backward_end = self.clock.mark()
        if self.task.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.task.clip_grad_norm)
        self.optimizer.step()
        self.global_step += 1
        self.schedule.step()
        end = self.clock.mark()
        return StepMarks(start, data, h2d, backward_end, end, self.probe.take()), loss.detach()

    @torch.no_grad()
    def evaluate(self) -> float:
        self.model.eval()
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        count = 0
        for i, (x, y) in enumerate(self.val_loader):
            if self.cfg.max_eval_batches and i >= self.cfg.max_eval_batches:
                break
            x, y = _to((x, y), self.device)
            total += self.task.metric_sum(self.task.forward(self.model, x, y, self.global_step), y).double()
            count += self.task.metric_count(y) if self.task.metric_count else len(y)
        self.model.train()
        total_all, count_all = ddp.reduce([total.item(), float(count)], self.device, "sum")
        return self.task.metric_finish(total_all, count_all)

    def run(self) -> dict:
        """Train all epochs; returns the cell's summary and its per-epoch rows."""
        cfg, clock = self.cfg, self.clock
        steps_per_epoch = min(len(self.train_loader), cfg.max_steps or len(self.train_loader))
        warmup = min(cfg.warmup_steps, steps_per_epoch * cfg.epochs - 1)
        epochs, status, reason = [], "ok", ""
        steady_time, steady_steps = 0.0, 0
        clock.synchronize()
        t_start = time.perf_counter()
        for epoch in range(cfg.epochs):
            self.sampler.set_epoch(epoch)
            t_epoch = time.perf_counter()
            marks, loss_sum = [], torch.zeros((), device=self.device)
            it = iter(self.train_loader)
            for _ in range(steps_per_epoch):
                m, loss = self._step(it)
                if self.step_hook:
                    self.step_hook(self.global_step)
                marks.append(m)
                loss_sum += loss
            eval_start = clock.mark()
            metric = self.evaluate()
            eval_end = clock.mark()
            times = resolve(clock, marks)  # the epoch's one synchronisation point
            skip = max(0, min(warmup - epoch * steps_per_epoch, steps_per_epoch))
            steady_time += times.step_seconds(skip)
            steady_steps += steps_per_epoch - skip
            row = {f"{p}_s": times.total(p) for p in PHASES}
            row.update(
                epoch=epoch + 1, epoch_s=time.perf_counter() - t_epoch, train_s=times.step_seconds(),
                eval_s=clock.seconds(eval_start, eval_end), steps=steps_per_epoch,
                train_loss=loss_sum.item() / steps_per_epoch, val_metric=metric,
            )
            epochs.append(row)
            finite = math.isfinite(row["train_loss"]) and math.isfinite(metric)
            # Every rank must take the same decision, or the ones that go on hang in a collective.
            if ddp.reduce([0.0 if finite else 1.0], self.device)[0] > 0:
                status, reason = "diverged", f"non-finite loss ({row['train_loss']}) in epoch {epoch + 1}"
                break
        wall = time.perf_counter() - t_start
        return self._summary(epochs, wall, steady_time, steady_steps, warmup, status, reason)

    def _summary(self, epochs, wall, steady_time, steady_steps, warmup, status, reason) -> dict:
        phase_cols = ["data_s", "h2d_s", "compute_s", "sync_s", "eval_s", "train_s"]
        totals = {c: sum(e[c] for e in epochs) for c in phase_cols}
        # Times are the max over ranks: the world moves at its slowest rank's pace.
        maxed = ddp.reduce([wall, steady_time] + [totals[c] for c in phase_cols], self.device)
        wall, steady_time, *phase_vals = maxed
        totals = dict(zip(phase_cols, phase_vals))
        samples = steady_steps * self.cfg.batch_size * self.world
        sps = samples / steady_time if steady_time > 0 else float("nan")
        steps_ps = steady_steps / steady_time if steady_time > 0 else float("nan")
        peak_gpu = torch.cuda.max_memory_allocated(self.device) / 2**20 if self.device.type == "cuda" else None
        return {
            "status": status, "reason": reason, "wall_s": wall,
            "epoch_s": statistics.median(e["epoch_s"] for e in epochs), "samples_per_s": sps,
            "warmup_steps": warmup, **totals,
            "final_train_loss": epochs[-1]["train_loss"], "val_metric": self.task.metric_name,
            "val_value": epochs[-1]["val_metric"], "naive_baseline": self.task.naive_metric,
            "flops_per_sample": self.flops_per_sample, "achieved_gflops": self.flops_per_sample * sps / 1e9,
            "peak_gpu_mb": peak_gpu, "global_batch_size": self.cfg.batch_size * self.world,
            "steps_per_s": steps_ps, **(self.task.stats() if self.task.stats else {}),
            "epochs_rows": epochs,
        }
