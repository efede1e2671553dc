"""What a run gathers as it goes, and the figures it ends with (a mixin of `Trainer`).

`Tally` keeps a row and a time-to-target point per evaluation and the steady-state steps. At the
run's end `Summary` turns it into the row's figures: the slowest rank's phases (every rank's own
totals go to ranks.csv, world.py), throughput over the steady-state steps, FLOPs, the peak and
where the memory went (memory.py). Times and the peak are maxima over ranks; gathering them is a
collective every rank reaches once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store.cell_result import EpochRow, Figures, RankRow
from . import ddp, memory, strategies, world
from .target import Evaluation, epoch_seconds


@dataclass
class Tally:
    """What a run has gathered so far: a row and a time-to-target point per evaluation, and
    the steady-state steps (warm-up left out) with the seconds they took."""

    rows: list[EpochRow] = field(default_factory=list)
    evals: list[Evaluation] = field(default_factory=list)
    steady_time: float = 0.0
    steady_steps: int = 0

    def add(self, row: EpochRow, times, warm_left: int, samples_per_step: int) -> None:
        """One interval's row; `warm_left`: warm-up steps not yet taken when it began."""
        self.rows.append(row)
        skip = max(0, min(warm_left, row.steps))
        self.steady_time += times.step_seconds(skip)
        self.steady_steps += row.steps - skip
        self.evals.append(
            Evaluation(
                row.step,
                row.epochs_done,
                row.step * samples_per_step,
                row.elapsed_s,
                row.train_elapsed_s,
                row.val_metric,
            )
        )


class Summary:
    """_figures() and _memory(), after the last step. A mixin of `Trainer`, which holds the
    model, the optimizer, the device, the task and the step count."""

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
        self, tally: Tally, wall: float, per_epoch: int, warmup: int
    ) -> tuple[Figures, tuple[RankRow, ...]]:
        """The run's figures, and every rank's own totals (ranks.csv). `warmup`: the first
        steps the tally left out of steady-state throughput."""
        epochs, steady_time, steady_steps = tally.rows, tally.steady_time, tally.steady_steps
        self.progress.phase("the run's figures (gathering every rank's totals)")
        comm = ddp.logged_comm(self.model, sum(e.steps for e in epochs))
        peak = self.accel.peak_bytes()
        # the slowest rank's phases (they sum to its step time); every rank's: ranks.csv (world.py)
        ranks, slow = world.rank_rows(
            epochs, self.cfg.run_id, self.rank, self.global_step, wall, self.accel, comm
        )
        # Times are the max over ranks: the world moves at its slowest rank's pace; so is the peak.
        wall, steady_time, peak_all = ddp.reduce([wall, steady_time, float(peak or 0)], self.device)
        ddp_figures = {}
        if self.world > 1:
            ddp_figures = dict(
                ddp_comm_s=slow.ddp_comm_s or 0.0, ddp_exposed_comm_s=slow.ddp_exposed_comm_s or 0.0
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
            gpus_used=world.distinct_gpus(r.gpu_uuid for r in ranks),
            sync_count=self.probe.count if self.world > 1 else None,
            precision=self.math.text,
            matmul_math=self.math.matmul,
            conv_math=self.math.conv,
            compile_s=self.compile_s,
            epochs_done=self.global_step / per_epoch,
            steps_done=self.global_step,
            **ddp_figures,
        ), ranks
