"""The one training loop every workload runs under, instrumented by phase.

    data    the step waits for the next batch (on CUDA: the device idles while the host gets it)
    h2d     batch moved to the device (non_blocking from pinned memory)
    compute forward + backward + optimizer step (minus exposed sync), and the step's bookkeeping
    sync    gradient communication the step waited for (DDP only; see ddp.py)
    eval    validation pass at the end of each epoch

Steps are contiguous (see timing.py): the phases of an epoch add up to the time from its
first step's start to its last step's end. data_wait (host seconds inside the loader) is kept
beside them on every device. The first `warmup_steps` steps count in wall time but not in
steady-state samples/s.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace

import torch

from ..contract import Task, TrainerParams
from ..device import Accelerator
from ..store.rows import PHASE_COLUMNS, STEP_PHASES, CellResult, EpochRow, Figures
from . import ddp, memory, strategies
from .loader import build_loaders
from .timing import Clock, StepMarks, resolve


@dataclass(frozen=True)
class LoopConfig:
    """The trainer's configuration: a cell's engine axes and its common parameters."""

    batch_size: int
    epochs: int
    knobs: TrainerParams
    seed: int = 0
    run_id: str = ""
    strategy: str = "single"

    @classmethod
    def from_spec(cls, spec) -> "LoopConfig":
        return cls(spec.batch_size, spec.epochs, TrainerParams.from_params(spec.param_dict), spec.seed, spec.run_id,
                   spec.strategy)


def scaled_lr(knobs: TrainerParams, world_size: int) -> float:
    factor = {"none": 1.0, "linear": float(world_size), "sqrt": math.sqrt(world_size)}[knobs.lr_scaling]
    return knobs.lr * factor


def warm_up(loss_of_batch, model: torch.nn.Module, samples: int, count: bool) -> float | None:
    """One untimed forward + backward before the clock starts: library initialisation (cuDNN,
    cuBLAS handles, lazy kernel loading) happens here, not in epoch 1. With `count`, torch's
    operator counter gives its FLOPs per sample (dense matrix products, not sparse ones)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False) if count else None
    if counter:
        with counter:
            loss_of_batch().backward()
    else:
        loss_of_batch().backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / samples if counter else None


def _to(x, y, device: torch.device):
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


class Trainer:
    """Runs one cell's training on one process (one rank of a DDP world)."""

    def __init__(self, task: Task, cfg: LoopConfig, device: Accelerator | torch.device | str, rank: int = 0,
                 world_size: int = 1, step_hook=None):
        self.accel = device if isinstance(device, Accelerator) else Accelerator(str(device))
        device = self.device = self.accel.torch
        self.task, self.cfg = task, cfg
        self.step_hook = step_hook  # called after every training step (the profiler's clock)
        self.rank, self.world = rank, world_size
        self.clock = Clock(self.accel)
        train, val = task.data.train, task.data.val
        if task.data.placement == "device":  # batches are sliced where the data lives: no copies, no h2d
            train, val = train.to(device), val.to(device)
            self.cfg = cfg = replace(cfg, knobs=replace(cfg.knobs, workers=0))
        self.sampler, self.train_loader, self.val_loader = build_loaders(
            train, val, task.data, cfg.knobs, cfg.batch_size, cfg.seed, self.accel, rank, world_size)
        if len(self.train_loader) == 0:
            raise ValueError(
                f"batch size {cfg.batch_size} x {world_size} process(es) exceeds the {len(train)} training samples")
        self.transfer = task.data.transfer or _to
        self.precision = self.accel.use_precision(cfg.knobs.precision)
        self.unavailable: dict[str, str] = {}  # measurements or levers that could not be had, and why
        self._build_model(task, cfg, world_size)
        self.global_step = 0
        warm = max(cfg.knobs.lr_warmup_steps, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warm))

    def _loss(self, model, x, y, step: int) -> torch.Tensor:
        with self.accel.autocast(self.cfg.knobs.precision):
            return self.task.model.loss(model, x, y, step)

    def _build_model(self, task: Task, cfg: LoopConfig, world_size: int) -> None:
        """The strategies' steps in their order (strategies.py): placement, the untimed warm-up
        pass (FLOPs), data parallelism, compilation (its first pass timed as compile_s), and the
        optimizer."""
        module = task.model.module.to(self.device)
        x, y = self.transfer(*next(iter(self.train_loader)), self.device)
        counted = warm_up(lambda: self._loss(module, x, y, 0), module, len(x), not task.flops_per_sample)
        self.flops_per_sample = task.flops_per_sample or counted
        self.probe = ddp.SyncProbe(self.clock)
        model = strategies.parallelize(cfg.strategy, module, self.accel, world_size, self.probe,
                                       cfg.knobs.bucket_cap_mb, cfg.knobs.ddp_log_every)
        self.model, self.compile_s, why = strategies.apply_compile(
            model, cfg.knobs.compile, lambda m: self._loss(m, x, y, 0).backward(), self.accel)
        if why:
            self.unavailable["compile"] = why
        self.optimizer = strategies.make_optimizer(cfg.strategy if world_size > 1 else "single", task.optim.factory,
                                                   self.model.parameters(), scaled_lr(cfg.knobs, world_size),
                                                   self.probe)

    def _step(self, it, start, loss_sum: torch.Tensor) -> StepMarks:
        """One step from `start` (the previous step's end mark) to its own end mark; the loss
        is added to loss_sum on the device, inside the step."""
        t0 = time.perf_counter()
        x, y = next(it)
        data_wait = time.perf_counter() - t0
        data = self.clock.mark()
        x, y = self.transfer(x, y, self.device)
        h2d = self.clock.mark()
        self.last_batch = (x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(self.model, x, y, self.global_step)
        loss.backward()
        backward_end = self.clock.mark()
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
        return StepMarks(start, data, h2d, backward_end, self.clock.mark(), self.probe.take(), data_wait, broadcast)

    @torch.no_grad()
    def evaluate(self) -> float:
        metric, limit = self.task.metric, self.cfg.knobs.max_eval_batches
        self.model.eval()
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)  # error, count: read once, at the end
        last = getattr(self, "last_batch", None)  # an empty shard repeats the last training batch
        for batch in self._eval_batches(limit):
            if batch is None:  # fsdp: an extra forward (its all-gathers) to match the other ranks
                self._predict(*last)
                continue
            last = x, y = self.transfer(*batch, self.device)
            sums[0] += metric.sum(self._predict(x, y), y).double()
            sums[1] += metric.count(y) if metric.count else len(y)
        self.model.train()
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
        most = int(ddp.reduce([float(mine)], self.device)[0]) if self.cfg.strategy == "fsdp" else mine
        for i, batch in enumerate(self.val_loader):
            if i >= mine:
                break
            yield batch
        yield from [None] * (most - mine)

    def _epoch(self, epoch: int, steps: int, skip: int) -> tuple[EpochRow, float]:
        """One epoch: its row, and the seconds of its steady (post-warm-up) steps."""
        self.sampler.set_epoch(epoch)
        t_epoch = time.perf_counter()
        marks, loss_sum = [], torch.zeros((), device=self.device)
        it = iter(self.train_loader)
        start = self.clock.mark()
        for _ in range(steps):
            marks.append(self._step(it, start, loss_sum))
            start = marks[-1].end
        metric = self.evaluate()
        eval_end = self.clock.mark()
        times = resolve(self.clock, marks)  # the epoch's one synchronisation point
        # eval runs from the last step's end mark: read before the next mark reuses pooled events
        eval_s = self.clock.seconds(start, eval_end)
        self.clock.release([eval_end])
        row = EpochRow(
            run_id=self.cfg.run_id, epoch=epoch + 1, epoch_s=time.perf_counter() - t_epoch,
            train_s=times.step_seconds(), **{f"{p}_s": times.total(p) for p in STEP_PHASES},
            eval_s=eval_s, steps=steps, train_loss=loss_sum.item() / steps, val_metric=metric,
            data_wait_s=times.total("data_wait"),
        )
        return row, times.step_seconds(skip)

    def run(self) -> CellResult:
        """Train all epochs: the cell's figures and its per-epoch rows."""
        knobs = self.cfg.knobs
        steps = min(len(self.train_loader), knobs.max_steps or len(self.train_loader))
        warmup = min(knobs.warmup_steps, steps * self.cfg.epochs - 1)
        epochs, status, reason = [], "ok", ""
        steady_time, steady_steps = 0.0, 0
        self.clock.synchronize()
        # the peak counts from here: the warm-up pass ran on the unsharded model (fsdp, zero1)
        self.accel.reset_peak()
        t_start = time.perf_counter()
        for epoch in range(self.cfg.epochs):
            skip = max(0, min(warmup - epoch * steps, steps))
            row, steady = self._epoch(epoch, steps, skip)
            epochs.append(row)
            steady_time += steady
            steady_steps += steps - skip
            finite = math.isfinite(row.train_loss) and math.isfinite(row.val_metric)
            # Every rank must take the same decision, or the ones that go on hang in a collective.
            if ddp.reduce([0.0 if finite else 1.0], self.device)[0] > 0:
                status, reason = "diverged", f"non-finite loss ({row.train_loss}) in epoch {epoch + 1}"
                break
        wall = time.perf_counter() - t_start
        figures = replace(self._figures(epochs, wall, steady_time, steady_steps, warmup), **self._memory())
        extras = self.task.extras() if self.task.extras else {}
        return CellResult(status, reason, figures, tuple(epochs), extras, self.unavailable)

    def _memory(self) -> dict:
        """Where this rank's memory went (the max over ranks), after training: parameters,
        gradients and optimizer state it holds, and one more step's activation peak (not in a
        profiled run, whose profiler records memory itself)."""
        held = [memory.param_bytes(self.model), memory.grad_bytes(self.model),
                memory.optimizer_state_bytes(strategies.local_optimizer(self.optimizer))]
        activation, source = 0.0, None
        if self.step_hook is None:
            x, y = self.last_batch
            self.optimizer.zero_grad(set_to_none=True)
            step = lambda: self._loss(self.model, x, y, self.global_step).backward()  # noqa: E731
            activation, source = memory.activation_peak(step, self.model, self.accel)
            self.optimizer.zero_grad(set_to_none=True)
        params, grads, state, activation = ddp.reduce([v / 2**20 for v in held] + [activation], self.device)
        return dict(param_mb=params, grad_mb=grads, optim_state_mb=state,
                    activation_peak_mb=activation if source else None, activation_source=source)

    def _figures(self, epochs: list[EpochRow], wall, steady_time, steady_steps, warmup) -> Figures:
        columns = [*PHASE_COLUMNS, "train_s", "data_wait_s"]
        totals = [sum(getattr(e, c) for e in epochs) for c in columns]
        comm, exposed = ddp.logged_comm(self.model, sum(e.steps for e in epochs))
        peak = self.accel.peak_bytes()
        # Times are the max over ranks: the world moves at its slowest rank's pace; so is the peak.
        wall, steady_time, comm, exposed, peak_all, *totals = ddp.reduce(
            [wall, steady_time, comm or 0.0, exposed or 0.0, float(peak or 0), *totals], self.device)
        ddp_figures = dict(ddp_comm_s=comm, ddp_exposed_comm_s=exposed) if self.world > 1 else {}
        sps = steady_steps * self.cfg.batch_size * self.world / steady_time if steady_time > 0 else float("nan")
        return Figures(
            wall_s=wall, epoch_s=statistics.median(e.epoch_s for e in epochs), samples_per_s=sps,
            steps_per_s=steady_steps / steady_time if steady_time > 0 else float("nan"),
            warmup_steps=warmup, **dict(zip(columns, totals)),
            final_train_loss=epochs[-1].train_loss, val_metric=self.task.metric.name,
            val_value=epochs[-1].val_metric, naive_baseline=self.task.metric.naive,
            flops_per_sample=self.flops_per_sample, achieved_gflops=self.flops_per_sample * sps / 1e9,
            peak_gpu_mb=peak_all / 2**20 if peak is not None else None,
            sync_count=self.probe.count if self.world > 1 else None, precision=self.precision, compile_s=self.compile_s,
            **ddp_figures,
        )
