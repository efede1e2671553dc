"""A training step, instrumented by phase, and the model it trains (a mixin of `Trainer`).

    data    the step waits for the next batch (on CUDA: the device idles while the host gets it)
    h2d     batch moved to the device (non_blocking from pinned memory)
    compute forward + backward + optimizer step (minus exposed sync), and the step's bookkeeping
    sync    gradient communication the step waited for (DDP only; see ddp.py)

A step only places marks on the device clock (timing.py) and reads nothing back: its phases are
resolved once per interval between evaluations, by the trainer's loop (trainer.py). The model
is built once, before the first step, by the strategies in their order (strategies.py).
"""

from __future__ import annotations

import time

import torch

from ..contract import Task
from . import ddp, strategies
from .loader import compile_batches
from .timing import StepMarks

# What a rank is doing in a step, for the stall watchdog's beat (heartbeat.py): set, not written
STEP_DATA = "a step's data"
STEP_PASS = "a step's forward and backward"
STEP_SYNCED = "a step's forward and backward (DDP's gradient all-reduce)"
STEP_OPTIMIZER = "a step's optimizer step"
STEP_VOTE = "the stop vote after a step (gloo all-reduce)"


def to_device(x, y, device: torch.device):
    """The default transfer of a batch (a workload's `Data.transfer` replaces it)."""
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


class Stepper:
    """_build_model() once, then _step() after _step(). A mixin of `Trainer`, which holds the
    task, the configuration, the device, the clock, the loaders and the heartbeat."""

    def _loss(self, model, x, y, step: int) -> torch.Tensor:
        with self.accel.autocast(self.cfg.knobs.precision):
            return self.task.model.loss(model, x, y, step)

    def _build_model(self, task: Task, cfg, world_size: int) -> None:
        """The strategies' steps in their order (strategies.py): placement, the untimed warm-up
        pass (FLOPs), data parallelism, compilation (its first pass timed as compile_s), and the
        optimizer."""
        module = task.model.module.to(self.device)
        x, y = self.transfer(*next(iter(self.train_loader)), self.device)
        batches = [(x, y)] + [
            self.transfer(*b, self.device) for b in compile_batches(self.sampler, self.train_loader)
        ]
        self.progress.phase("the untimed warm-up pass")
        counted = strategies.warm_up(
            lambda b: self._loss(module, *b, 0), module, batches, len(x), not task.flops_per_sample
        )
        self.flops_per_sample = task.flops_per_sample or counted
        self.probe = ddp.SyncProbe(self.clock)
        shared = " (its parameters' broadcast)" if world_size > 1 else ""
        self.progress.phase(f"wrapping the model for {cfg.strategy}{shared}")
        model = strategies.parallelize(
            cfg.strategy,
            module,
            self.accel,
            world_size,
            self.probe,
            cfg.knobs.bucket_cap_mb,
            cfg.knobs.ddp_log_every,
            cfg.knobs.backend,
        )
        self.progress.phase("compiling the model (its first forward and backward)")
        self.model, self.compile_s, why = strategies.apply_compile(
            model,
            cfg.knobs.compile,
            lambda m: [self._loss(m, bx, by, 0).backward() for bx, by in batches],
            self.accel,
        )
        if why:
            self.unavailable["compile"] = why
        self.optimizer = strategies.make_optimizer(
            cfg.strategy if world_size > 1 else "single",
            task.optim.factory,
            self.model.parameters(),
            strategies.scaled_lr(cfg.knobs, cfg.batch_size, world_size),
            self.probe,
        )

    def _step(self, batches, start, loss_sum: torch.Tensor) -> StepMarks:
        """One step from `start` (the previous step's end mark) to its own end mark; the loss
        is added to loss_sum on the device, inside the step."""
        t0 = time.perf_counter()
        self.progress.phase(STEP_DATA)
        x, y = next(batches)
        data_wait = time.perf_counter() - t0
        data = self.clock.mark()
        x, y = self.transfer(x, y, self.device)
        h2d = self.clock.mark()
        self.last_batch = (x, y)
        self.optimizer.zero_grad(set_to_none=True)
        self.progress.phase(STEP_SYNCED if self.world > 1 else STEP_PASS)
        loss = self._loss(self.model, x, y, self.global_step)
        loss.backward()
        backward_end = self.clock.mark()
        self.progress.phase(STEP_OPTIMIZER)
        if self.task.optim.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.task.optim.clip_grad_norm)
        self.optimizer.step()
        local_end = self.probe.take_broadcast()  # zero1: its parameter broadcast is sync
        broadcast = (local_end, self.clock.mark()) if local_end is not None else None
        self.global_step += 1
        self.schedule.step()
        loss_sum += loss.detach()
        if self.step_hook:
            self.step_hook(self.global_step)
        self.progress.step(time.perf_counter() - t0)  # host time: no device synchronisation
        return StepMarks(
            start,
            data,
            h2d,
            backward_end,
            self.clock.mark(),
            self.probe.take(),
            data_wait,
            broadcast,
        )
