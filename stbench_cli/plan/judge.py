"""How `stbench tune` judges one step (issue 32): every value tried against the step's reference
(the best so far), round by round. Repeats run as the study's outer loop, so the cells of one
round saw the same machine: each round gives a ratio, and the 95% t-interval of their geometric
mean (stbench.stats.paired) says whether a value is better. A value is kept only when that
interval lies above 1 and its validation metric is no worse than the reference's by more than
QUALITY_TOLERANCE. Pure.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

from ..stats import paired
from .levers import BATCH, Lever

SPS, TTT, QUALITY = "samples_per_s", "time_to_target_s", "val_value"
# samples/s over every step, warm-up included: the measure of a step where a cell ended inside
# its warm-up (a contended cell may take seconds a step), so that no round loses its pair
ALL_STEPS = "samples_per_s_all_steps"
QUALITY_TOLERANCE = 0.05  # a faster value that learns more than 5% worse is not kept
LOWER_IS_BETTER = {TTT, QUALITY}


@dataclass(frozen=True)
class Verdict:
    """One value of a step against the reference: ratio > 1 is better, whatever the measure."""

    value: object
    ratio: float | None = None  # geometric mean of the per-round ratios
    low: float | None = None  # its 95% interval (None with fewer than two rounds)
    high: float | None = None
    rounds: int = 0
    median: float | None = None  # the measure's median over the value's ok rows
    samples_per_s: float | None = None
    quality: float | None = None  # median validation metric (lower is better)
    note: str = ""  # failed rows, or why a better value was not kept

    @property
    def significant(self) -> bool:
        return self.low is not None and self.low > 1.0


def value_of(row: dict, lever: str) -> object:
    """The lever's value in a row (runs.csv text, or a row as written)."""
    if lever == BATCH:
        return int(row["batch_size"])
    return json.loads(row["params"])[lever]


def number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def measure_of(lever: Lever | None, rows: list[dict]) -> str:
    """Throughput (steady, or over all steps where a cell had no steady steps), or for a lever
    that changes what is learned the time to target where every ok row reached it, else the
    validation metric after the same training seconds."""
    ok = [r for r in rows if r["status"] == "ok"]
    if lever is None or not lever.quality_judged:
        return SPS if all(number(r.get(SPS)) is not None for r in ok) else ALL_STEPS
    return TTT if ok and all(number(r.get(TTT)) is not None for r in ok) else QUALITY


def measured(row: dict, measure: str) -> float | None:
    """A row's value of a measure (ALL_STEPS computed from its steps and training seconds)."""
    if measure != ALL_STEPS:
        return number(row.get(measure))
    steps, seconds = number(row.get("steps_done")), number(row.get("train_s"))
    world = number(row.get("world_size")) or 1
    return steps * float(row["batch_size"]) * world / seconds if steps and seconds else None


def by_round(rows: list[dict], measure: str) -> dict[int, float]:
    return {
        int(r["repeat"]): v
        for r in rows
        if r["status"] == "ok" and (v := measured(r, measure)) is not None
    }


def _median(rows: list[dict], column: str) -> float | None:
    values = [v for r in rows if r["status"] == "ok" and (v := measured(r, column)) is not None]
    return statistics.median(values) if values else None


def judge(lever: Lever, rows: list[dict], reference: object) -> tuple[str, list[Verdict], object]:
    """(measure, a verdict per value tried, the value kept) of one step's rows."""
    measure = measure_of(lever, rows)
    groups: dict[object, list[dict]] = {}
    for r in rows:
        groups.setdefault(value_of(r, lever.name), []).append(r)
    ref_rows = groups.get(reference, [])
    ref = by_round(ref_rows, measure)
    ref_quality = _median(ref_rows, QUALITY)
    verdicts = []
    for value, group in groups.items():
        ratio, low, high, n = paired(ref, by_round(group, measure), measure in LOWER_IS_BETTER)
        failed = [f"{r['status']}: {r['reason']}" for r in group if r["status"] != "ok"]
        quality = _median(group, QUALITY)
        note = f"{len(failed)} of {len(group)} runs not ok ({failed[0]})" if failed else ""
        if (
            value != reference
            and low is not None
            and low > 1
            and measure != QUALITY
            and _worse(quality, ref_quality)
        ):
            note = (
                f"faster, but its validation metric {quality:.4g} is more than "
                f"{QUALITY_TOLERANCE:.0%} worse than {ref_quality:.4g}"
            )
        verdicts.append(
            Verdict(
                value,
                ratio,
                low,
                high,
                n,
                _median(group, measure),
                _median(group, SPS),
                quality,
                note,
            )
        )
    keep = [v for v in verdicts if v.value != reference and v.significant and not v.note]
    kept = max(keep, key=lambda v: v.ratio).value if keep else reference
    return measure, verdicts, kept


def _worse(quality: float | None, reference: float | None) -> bool:
    return (
        quality is not None
        and reference is not None
        and quality > reference * (1 + QUALITY_TOLERANCE)
    )
