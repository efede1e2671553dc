"""Time to quality, as MLPerf Training times it: the clock starts with the first training step
and stops at the end of the first evaluation whose validation metric reaches the target;
evaluation time counts. stbench also keeps the same figure without evaluation (training
steps only), so a cell's eval cadence does not decide its score.

Every metric stbench's workloads report is an error (lower is better): a run has reached
its target when the metric is at or below it. Pure: no torch.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Evaluation:
    """One evaluation point of a run: how far training had got, and the metric there."""

    step: int  # optimizer steps so far
    epochs_done: float  # steps / steps per epoch
    samples: int  # training samples seen by the whole world
    elapsed_s: float  # wall seconds since the first step, evaluation included (MLPerf's clock)
    train_elapsed_s: float  # seconds of training steps only
    value: float


def resolve_target(explicit: float, ratio: float | None, naive: float | None) -> float | None:
    """The metric value a run must reach: `--set target=V` when V > 0, else the workload's
    default, `ratio` x its naive baseline (None where neither is known)."""
    if explicit > 0:
        return explicit
    if ratio and naive is not None and math.isfinite(naive):
        return ratio * naive
    return None


def reached(value: float, target: float | None) -> bool:
    return target is not None and math.isfinite(value) and value <= target


def target_figures(evals: list[Evaluation], target: float | None) -> dict:
    """The row's time-to-target columns: when and after how much training the first
    evaluation at or below the target ended (None: not reached, or no target)."""
    hit = next((e for e in evals if reached(e.value, target)), None)
    out = dict(target=target, target_reached=None if target is None else hit is not None)
    if hit is None:
        return {
            **out,
            "time_to_target_s": None,
            "time_to_target_train_s": None,
            "epochs_to_target": None,
            "samples_to_target": None,
        }
    return {
        **out,
        "time_to_target_s": hit.elapsed_s,
        "time_to_target_train_s": hit.train_elapsed_s,
        "epochs_to_target": hit.epochs_done,
        "samples_to_target": hit.samples,
    }


def epoch_seconds(rows, wall: float, per_epoch: int, steps: int) -> float:
    """Seconds per epoch: the median over epochs when every evaluation row is one whole epoch,
    else the run's wall time per epoch done (a step cadence or a budget cut rows elsewhere)."""
    if all(r.steps == per_epoch and r.step % per_epoch == 0 for r in rows):
        return statistics.median(r.epoch_s for r in rows)
    return wall * per_epoch / steps
