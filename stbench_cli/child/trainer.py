"""The one training loop every workload runs under: intervals of steps between evaluations.

A step's phases (data, h2d, compute, sync) are step.py's; eval is the validation pass at each
evaluation point (an epoch's end, `eval_every` steps, `eval_every_s` s; evaluation.py).
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
from ..device import Accelerator, Clock
from ..store.cell_result import STEP_PHASES, CellResult, EpochRow
from . import ddp, world
from .evaluation import Evaluator
from .heartbeat import Heartbeat
from .loader import build_loaders, epochs
from .step import STEP_VOTE, Stepper, to_device
from .summary import Summary, Tally
from .target import reached, resolve_target, target_figures
from .timing import resolve_marks


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


@dataclass(frozen=True)
class Cadence:
    """When a run evaluates and when it ends, fixed before its first step."""

    per_epoch: int  # steps in an epoch (`max_steps` caps it)
    total: int | None  # steps in the run; None: the time budget decides
    every: int  # steps between evaluations (by time only: never by steps)
    warmup: int  # first steps left out of steady-state throughput (>= 10 under DDP, ddp.py)

    def steps_from(self, step: int) -> int:
        """The steps of the interval that starts at `step`: to the next evaluation by steps, or
        to the run's last step."""
        left = self.every - step % self.every
        return left if self.total is None else min(left, self.total - step)


class Trainer(Stepper, Evaluator, Summary):
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
        if task.data.placement == "device":  # batches are sliced where the data lives: no h2d
            train, val = train.to(device), val.to(device)
            self.cfg = cfg = replace(cfg, knobs=replace(cfg.knobs, workers=0))
        self.sampler, self.train_loader, self.val_loader = build_loaders(
            train, val, task.data, cfg.knobs, cfg.batch_size, cfg.seed, self.accel, rank, world_size
        )
        if len(self.train_loader) == 0:
            raise ValueError(
                f"batch size {cfg.batch_size} x {world_size} process(es) exceeds the "
                f"{len(train)} training samples"
            )
        self.transfer = task.data.transfer or to_device
        self.math = self.accel.use_precision(cfg.knobs.precision)
        self.unavailable: dict[str, str] = {}  # measurements or levers not had, and why
        self._build_model(task, cfg, world_size)
        warm = max(cfg.knobs.lr_warmup_steps, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm)
        )
        # The loop's state. last_batch: the memory figures' extra step, an empty shard's eval.
        self.global_step, self.epoch, self.last_batch = 0, 0, None
        self.eval_host_s = self.train_elapsed = 0.0  # evaluation's host seconds; training's
        # no group until run's set-up makes the world's (new_group is a collective)
        self.vote = world.Vote(needed=False)

    def run(self) -> CellResult:
        """Train until the epochs are done, the time budget is spent, or (with stop_at_target)
        an evaluation reaches the target: the cell's figures and one row per evaluation."""
        knobs, plan = self.cfg.knobs, self._cadence()
        self.progress.planned(plan.per_epoch, plan.total)
        target = resolve_target(knobs.target, self.cfg.target_ratio, self.task.metric.naive)
        due = knobs.eval_every_s  # by time: the training seconds of the next evaluation (0: none)
        tally, status, reason, stopped = Tally(), "ok", "", "epochs"
        batches = self._batches(plan.per_epoch)
        t_start = self._start(vote=bool(knobs.time_budget or due))
        while plan.total is None or self.global_step < plan.total:
            first, t_interval = self.global_step, time.perf_counter()
            steps = plan.steps_from(first)
            marks, loss_sum, spent = self._interval(batches, steps, knobs.time_budget, due, t_start)
            if due:  # the next evaluation by time, agreed by every rank now (an all-reduce)
                due = self._next_due(t_start)
            row, times = self._evaluated(marks, loss_sum, t_interval, plan.per_epoch, t_start)
            tally.add(row, times, plan.warmup - first, self.cfg.batch_size * self.world)
            if self._diverged(row):  # asked of every rank (an all-reduce): all stop alike
                status = "diverged"
                reason = f"non-finite loss ({row.train_loss}) in epoch {row.epoch}"
                break
            if knobs.stop_at_target and reached(row.val_metric, target):  # the same on every rank
                stopped = "target"
                break
            if spent:
                stopped = "time budget"
                break
        wall = time.perf_counter() - t_start
        # the stop vote's last all-reduce (launched a step ago): read before its group goes
        self.vote.close()
        # every rank's totals gathered, times and the peak reduced, then memory's all-reduce
        figures, ranks = self._figures(tally, wall, plan.per_epoch, plan.warmup)
        figures = replace(
            figures, **self._memory(), **target_figures(tally.evals, target), stopped_by=stopped
        )
        extras = self.task.extras() if self.task.extras else {}
        return CellResult(
            status, reason, figures, tuple(tally.rows), extras, self.unavailable, ranks
        )

    def _cadence(self) -> Cadence:
        """How many steps an epoch and the run take, and how many between evaluations."""
        knobs = self.cfg.knobs
        per_epoch = min(len(self.train_loader), knobs.max_steps or len(self.train_loader))
        total = None if knobs.time_budget else per_epoch * self.cfg.epochs
        # by time, the steps run on until the clock says (an epoch's end does not evaluate)
        every = knobs.eval_every or (2**62 if knobs.eval_every_s else per_epoch)
        warmup = ddp.warmup_steps(knobs.warmup_steps, total, ddp.wraps(self.model))
        return Cadence(per_epoch, total, every, warmup)

    def _start(self, vote: bool) -> float:
        """The set-up right before the first step; the host clock's start of training."""
        # the stop vote's gloo group: new_group is a collective, made by every rank here
        self.vote = world.Vote(vote, self.cfg.pg_timeout_s)
        self.clock.synchronize()
        # the peak counts from here: the warm-up pass ran on the unsharded model (fsdp, zero1)
        self.accel.reset_peak()
        return time.perf_counter()

    def _batches(self, per_epoch: int):
        """Training batches epoch after epoch, without end (a time budget decides when to stop);
        `self.epoch` follows them."""
        for self.epoch, batch in epochs(self.sampler, self.train_loader, per_epoch):
            yield batch

    def _spent(self, t_start: float) -> float:
        """Host seconds of training so far (evaluation excluded): what a time budget counts."""
        return time.perf_counter() - t_start - self.eval_host_s

    def _interval(
        self, batches, steps: int, budget: float, due: float, t_start: float
    ) -> tuple[list, torch.Tensor, bool]:
        """Up to `steps` steps, fewer once the budget is spent or training reaches `due` s:
        (marks, loss, spent)."""
        marks, loss_sum = [], torch.zeros((), device=self.device)
        start = self.clock.mark()
        for _ in range(steps):
            marks.append(self._step(batches, start, loss_sum))
            start = marks[-1].end
            # the slowest rank's figure a step late, no host wait: all ranks stop alike (world.py)
            if budget or due:
                self.progress.phase(STEP_VOTE)
            spent = self.vote(self._spent(t_start)) if budget or due else 0.0
            if budget and spent >= budget:
                return marks, loss_sum, True
            if due and spent >= due:
                break
        return marks, loss_sum, False

    def _next_due(self, t_start: float) -> float:
        """The next evaluation by time: the first multiple of the cadence still ahead."""
        every = self.cfg.knobs.eval_every_s
        # an all-reduce (max): every rank agrees on the due time, at an evaluation, which
        # synchronises anyway
        spent = ddp.reduce([self._spent(t_start)], self.device)[0]
        return (math.floor(spent / every) + 1) * every

    def _evaluated(self, marks, loss_sum, t_interval: float, per_epoch: int, t_start: float):
        """Evaluate after an interval of steps: its row (phases, loss, metric, where it fell)
        and the interval's resolved step times."""
        t_eval = time.perf_counter()
        metric = self.evaluate()
        self.eval_host_s += time.perf_counter() - t_eval
        eval_end = self.clock.mark()
        times = resolve_marks(self.clock, marks)  # the interval's one synchronisation point
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

    def _diverged(self, row: EpochRow) -> bool:
        """A non-finite loss or metric on any rank."""
        finite = math.isfinite(row.train_loss) and math.isfinite(row.val_metric)
        # an all-reduce: every rank must take the same decision, or the ones that go on hang in
        # a collective
        return ddp.reduce([0.0 if finite else 1.0], self.device)[0] > 0
