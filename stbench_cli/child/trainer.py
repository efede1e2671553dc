"""The one training loop every workload runs under, instrumented by phase.

    data    the step waits for the next batch (on CUDA: the device idles while the host gets it)
    h2d     batch moved to the device (non_blocking from pinned memory)
    compute forward + backward + optimizer step (minus exposed sync), and the step's bookkeeping
    sync    gradient communication the step waited for (DDP only; see ddp.py)
    eval    validation pass at each evaluation point (epoch's end, `eval_every` steps, `eval_every_s` s)

Steps are contiguous (see timing.py): the phases of an interval between evaluations add up
to the time from its first step's start to its last step's end. A run ends after its epochs,
when its `time_budget` of training is spent, or (`stop_at_target`) at the first evaluation
that reaches its target; every evaluation is a row, and the first to reach the target gives
the run's time to target (target.py). data_wait (host seconds inside the loader) is kept
beside them on every device. The first `warmup_steps` steps (at least 10 under DDP: its logger
samples them with a host sync, ddp.py) count in wall time but not in steady-state samples/s.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import torch

from ..contract import Task, TrainerParams
from ..device import Accelerator
from ..store.rows import STEP_PHASES, CellResult, EpochRow, Figures
from . import ddp, memory, strategies, world
from .evaluation import Evaluator
from .heartbeat import Heartbeat
from .loader import build_loaders, compile_batches
from .target import Evaluation, epoch_seconds, reached, resolve_target, target_figures
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
    target_ratio: float | None = None  # the workload's default target, x its naive baseline
    pg_timeout_s: float | None = None  # every process group's timeout (store/progress.py)

    @classmethod
    def from_spec(cls, spec, target_ratio: float | None = None) -> LoopConfig:
        return cls(
            spec.batch_size,
            spec.epochs,
            TrainerParams.from_params(spec.param_dict),
            spec.seed,
            spec.run_id,
            spec.strategy,
            target_ratio,
        )


def _to(x, y, device: torch.device):
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


# What a rank is doing in a step, for the stall watchdog's beat (heartbeat.py): set, not written
STEP_DATA = "a step's data"
STEP_PASS = "a step's forward and backward"
STEP_SYNCED = "a step's forward and backward (DDP's gradient all-reduce)"
STEP_OPTIMIZER = "a step's optimizer step"
STEP_VOTE = "the stop vote after a step (gloo all-reduce)"


class Trainer(Evaluator):
    """Runs one cell's training on one process (one rank of a DDP world). `progress`: where
    it is, for the parent's stall watchdog (heartbeat.py; by default kept in memory only)."""

    def __init__(
        self,
        task: Task,
        cfg: LoopConfig,
        device: Accelerator | torch.device | str,
        rank: int = 0,
        world_size: int = 1,
        step_hook=None,
        progress: Heartbeat | None = None,
    ):
        self.accel = device if isinstance(device, Accelerator) else Accelerator(str(device))
        device = self.device = self.accel.torch
        self.task, self.cfg = task, cfg
        self.step_hook = step_hook  # called after every training step (the profiler's clock)
        self.progress = progress if progress is not None else Heartbeat()
        self.rank, self.world = rank, world_size
        self.clock = Clock(self.accel)
        train, val = task.data.train, task.data.val
        if (
            task.data.placement == "device"
        ):  # batches are sliced where the data lives: no copies, no h2d
            train, val = train.to(device), val.to(device)
            self.cfg = cfg = replace(cfg, knobs=replace(cfg.knobs, workers=0))
        self.sampler, self.train_loader, self.val_loader = build_loaders(
            train, val, task.data, cfg.knobs, cfg.batch_size, cfg.seed, self.accel, rank, world_size
        )
        if len(self.train_loader) == 0:
            raise ValueError(
                f"batch size {cfg.batch_size} x {world_size} process(es) exceeds the {len(train)} training samples"
            )
        self.transfer = task.data.transfer or _to
        self.precision = self.accel.use_precision(cfg.knobs.precision)
        self.unavailable: dict[
            str, str
        ] = {}  # measurements or levers that could not be had, and why
        self._build_model(task, cfg, world_size)
        self.global_step = 0
        warm = max(cfg.knobs.lr_warmup_steps, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm)
        )

    def _loss(self, model, x, y, step: int) -> torch.Tensor:
        with self.accel.autocast(self.cfg.knobs.precision):
            return self.task.model.loss(model, x, y, step)

    def _build_model(self, task: Task, cfg: LoopConfig, world_size: int) -> None:
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

    def _batches(self, per_epoch: int):
        """Training batches epoch after epoch, without end (a time budget decides when to stop).
        An epoch's iterator starts inside its first step's data phase: the step waits for it."""
        epoch = 0
        while True:
            self.sampler.set_epoch(epoch)
            self.epoch = epoch
            it = iter(self.train_loader)
            for _ in range(per_epoch):
                yield next(it)
            epoch += 1

    def _spent(self, t_start: float) -> float:
        """Host seconds of training so far (evaluation excluded): what a time budget counts."""
        return time.perf_counter() - t_start - self.eval_host_s

    def _interval(
        self, batches, steps: int, budget: float, due: float, t_start: float
    ) -> tuple[list, torch.Tensor, bool]:
        """Up to `steps` steps, fewer once the budget is spent or training reaches `due` s: (marks, loss, spent)."""
        marks, loss_sum = [], torch.zeros((), device=self.device)
        start = self.clock.mark()
        for _ in range(steps):
            marks.append(self._step(batches, start, loss_sum))
            start = marks[-1].end
            # the slowest rank's figure a step late, with no host wait: all ranks stop alike (world.py)
            if budget or due:
                self.progress.phase(STEP_VOTE)
            spent = self.vote(self._spent(t_start)) if budget or due else 0.0
            if budget and spent >= budget:
                return marks, loss_sum, True
            if due and spent >= due:
                break
        return marks, loss_sum, False

    def _evaluated(self, marks, loss_sum, t_interval: float, per_epoch: int, t_start: float):
        """Evaluate after an interval of steps: its row (phases, loss, metric, where it fell)
        and the interval's resolved step times."""
        t_eval = time.perf_counter()
        metric = self.evaluate()
        self.eval_host_s += time.perf_counter() - t_eval
        eval_end = self.clock.mark()
        times = resolve(self.clock, marks)  # the interval's one synchronisation point
        # eval runs from the last step's end mark: read before the next mark reuses pooled events
        eval_s = self.clock.seconds(marks[-1].end, eval_end)
        self.clock.release([eval_end])
        self.train_elapsed += times.step_seconds()
        return EpochRow(
            run_id=self.cfg.run_id,
            epoch=self.epoch + 1,
            epoch_s=time.perf_counter() - t_interval,
            train_s=times.step_seconds(),
            **{f"{p}_s": times.total(p) for p in STEP_PHASES},
            eval_s=eval_s,
            steps=len(marks),
            train_loss=loss_sum.item() / len(marks),
            val_metric=metric,
            data_wait_s=times.total("data_wait"),
            step=self.global_step,
            epochs_done=self.global_step / per_epoch,
            elapsed_s=time.perf_counter() - t_start,
            train_elapsed_s=self.train_elapsed,
        ), times

    def run(self) -> CellResult:
        """Train until the epochs are done, the time budget is spent, or (with stop_at_target)
        an evaluation reaches the target: the cell's figures and one row per evaluation."""
        knobs = self.cfg.knobs
        per_epoch = min(len(self.train_loader), knobs.max_steps or len(self.train_loader))
        total = (
            None if knobs.time_budget else per_epoch * self.cfg.epochs
        )  # None: the budget decides
        warmup = ddp.warmup_steps(
            knobs.warmup_steps, total, ddp.wraps(self.model)
        )  # >= 10 under DDP (ddp.py)
        # by time, the steps run on until the clock says (an epoch's end does not evaluate)
        every, due = (
            knobs.eval_every or (2**62 if knobs.eval_every_s else per_epoch),
            knobs.eval_every_s,
        )
        target = resolve_target(knobs.target, self.cfg.target_ratio, self.task.metric.naive)
        rows, evals, status, reason, stopped = [], [], "ok", "", "epochs"
        steady_time, steady_steps = 0.0, 0
        self.eval_host_s, self.train_elapsed, self.epoch = 0.0, 0.0, 0
        batches = self._batches(per_epoch)
        self.vote = world.Vote(bool(knobs.time_budget or due), self.cfg.pg_timeout_s)
        self.clock.synchronize()
        # the peak counts from here: the warm-up pass ran on the unsharded model (fsdp, zero1)
        self.accel.reset_peak()
        t_start = time.perf_counter()
        while total is None or self.global_step < total:
            first, t_interval = self.global_step, time.perf_counter()
            steps = (
                every - first % every
                if total is None
                else min(every - first % every, total - first)
            )
            marks, loss_sum, spent = self._interval(batches, steps, knobs.time_budget, due, t_start)
            if due:  # the next evaluation by time: the first multiple of the cadence still ahead (agreed now)
                due = (
                    math.floor(
                        ddp.reduce([self._spent(t_start)], self.device)[0] / knobs.eval_every_s
                    )
                    + 1
                ) * knobs.eval_every_s
            row, times = self._evaluated(marks, loss_sum, t_interval, per_epoch, t_start)
            rows.append(row)
            skip = max(0, min(warmup - first, len(marks)))
            steady_time += times.step_seconds(skip)
            steady_steps += len(marks) - skip
            evals.append(
                Evaluation(
                    row.step,
                    row.epochs_done,
                    row.step * self.cfg.batch_size * self.world,
                    row.elapsed_s,
                    row.train_elapsed_s,
                    row.val_metric,
                )
            )
            finite = math.isfinite(row.train_loss) and math.isfinite(row.val_metric)
            # Every rank must take the same decision, or the ones that go on hang in a collective.
            if ddp.reduce([0.0 if finite else 1.0], self.device)[0] > 0:
                status, reason = (
                    "diverged",
                    f"non-finite loss ({row.train_loss}) in epoch {row.epoch}",
                )
                break
            if knobs.stop_at_target and reached(
                row.val_metric, target
            ):  # the metric is the same on every rank
                stopped = "target"
                break
            if spent:
                stopped = "time budget"
                break
        wall, _ = time.perf_counter() - t_start, self.vote.close()
        figures = replace(
            self._figures(rows, wall, steady_time, steady_steps, warmup, per_epoch),
            **self._memory(),
            **target_figures(evals, target),
            stopped_by=stopped,
        )
        extras = self.task.extras() if self.task.extras else {}
        return CellResult(
            status, reason, figures, tuple(rows), extras, self.unavailable, self.ranks
        )

    def _memory(self) -> dict:
        """Where this rank's memory went (the max over ranks), after training; one more step's
        activation peak except in a profiled run (its profiler records memory itself)."""
        step = None
        self.progress.phase("the memory figures (one more step; their all-reduce)")
        if self.step_hook is None:
            x, y = self.last_batch
            step = lambda: self._loss(self.model, x, y, self.global_step).backward()  # noqa: E731
        return memory.held_figures(
            self.model, strategies.local_optimizer(self.optimizer), self.accel, step
        )

    def _figures(
        self, epochs: list[EpochRow], wall, steady_time, steady_steps, warmup, per_epoch
    ) -> Figures:
        self.progress.phase("the run's figures (gathering every rank's totals)")
        comm = ddp.logged_comm(self.model, sum(e.steps for e in epochs))
        peak = self.accel.peak_bytes()
        # every phase of the slowest rank (they sum to its step time); every rank's in ranks.csv (world.py)
        self.ranks, slow = world.rank_rows(
            epochs, self.cfg.run_id, self.rank, self.global_step, wall, self.accel, comm
        )
        # Times are the max over ranks: the world moves at its slowest rank's pace; so is the peak.
        wall, steady_time, peak_all = ddp.reduce([wall, steady_time, float(peak or 0)], self.device)
        ddp_figures = (
            dict(
                ddp_comm_s=slow.ddp_comm_s or 0.0, ddp_exposed_comm_s=slow.ddp_exposed_comm_s or 0.0
            )
            if self.world > 1
            else {}
        )
        sps = (
            steady_steps * self.cfg.batch_size * self.world / steady_time
            if steady_time > 0
            else float("nan")
        )
        return Figures(
            wall_s=wall,
            epoch_s=epoch_seconds(epochs, wall, per_epoch, self.global_step),
            samples_per_s=sps,
            steps_per_s=steady_steps / steady_time if steady_time > 0 else float("nan"),
            warmup_steps=warmup,
            **{c: getattr(slow, c) for c in world.TOTALS},
            final_train_loss=epochs[-1].train_loss,
            val_metric=self.task.metric.name,
            val_value=epochs[-1].val_metric,
            naive_baseline=self.task.metric.naive,
            flops_per_sample=self.flops_per_sample,
            achieved_gflops=self.flops_per_sample * sps / 1e9,
            peak_gpu_mb=peak_all / 2**20 if peak is not None else None,
            gpus_used=world.distinct_gpus(r.gpu_uuid for r in self.ranks),
            sync_count=self.probe.count if self.world > 1 else None,
            precision=self.precision,
            compile_s=self.compile_s,
            epochs_done=self.global_step / per_epoch,
            steps_done=self.global_step,
            **ddp_figures,
        )
