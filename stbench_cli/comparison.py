"""One comparison: a study's runs reduced, paired and judged one way everywhere.

`stbench tune` judging a lever's values, `run --budget` and `gpu-vs-cpu` deciding another round,
the gate judging a new run against a baseline, the report's findings and the GPU acceptance's
verdicts all hold one cell against another. They do it with what this module holds, pure and
pandas-free (as stats.py, every layer may use it):

- `number`: a Run's or a frame's value as a float, None where there is none (None, NaN);
- `measured`: a run's value of a measure (samples/s over every step computed from its steps);
- `by_round`: a cell's values by round, its ok runs only (rounds pair: a round's cells saw the
  same machine), and `median` of values;
- `measure_of`: the one rule that picks what a study's comparisons judge;
- `Verdict` and `judge`: one cell held against a reference, paired by round where they share
  two rounds (stats.paired), else by their repeats (stats.significant), in one record;
- `wins_from`: over sizes in order, the one from which a side wins at every larger size too
  (where the GPU starts to pay: a device study's finding, and gpu-vs-cpu's answer).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .stats import paired, rounds_needed, rounds_within, significant

SPS, TTT, QUALITY, WALL = "samples_per_s", "time_to_target_s", "val_value", "wall_s"
# samples/s over every step, warm-up included: the measure of a cell that ended inside its
# warm-up (a contended cell may take seconds a step), so that no round loses its pair
ALL_STEPS = "samples_per_s_all_steps"
HIGHER_IS_BETTER = frozenset(
    {SPS, ALL_STEPS, "steps_per_s", "achieved_gflops", "peak_fraction", "val_value_gain"}
)

# Two configurations "look equal" when the paired 95% interval of their ratio lies within
# 1 -/+ MARGIN: a conclusion of its own, never drawn from a large estimate of the rounds needed
MARGIN = 0.05
CAP = 1000  # the most rounds an estimate names (stats' cap): no count of rounds would conclude


def looks_equal(low: float | None, high: float | None) -> bool:
    """Whether a ratio's 95% interval lies within 1 -/+ MARGIN (None: no interval)."""
    return low is not None and high is not None and low >= 1 - MARGIN and high <= 1 + MARGIN


def interval_text(low: float, high: float) -> str:
    """A paired ratio's 95% interval, "0.93-0.99x": two decimals, more where a bound would
    round to 1.00 without being 1 (1.003-1.19x is apart from 1x; 1.00-1.19x would read as not)."""
    return f"{_bound_text(low)}-{_bound_text(high)}x"


def _bound_text(value: float) -> str:
    for digits in (2, 3, 4):
        shown = f"{value:.{digits}f}"
        if float(shown) != 1.0 or value == 1.0:
            break
    return shown


def number(value) -> float | None:
    """A value as a float: None where there is none (None, "", NaN, inf, text that is no
    number). A Run has None for a gap, a frame NaN; a test's row may still be text."""
    if isinstance(value, bool):
        return float(value)
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def measured(row: Mapping, measure: str) -> float | None:
    """A run's value of a measure; ALL_STEPS computed from its steps and training seconds."""
    if measure != ALL_STEPS:
        return number(row.get(measure))
    steps, seconds = number(row.get("steps_done")), number(row.get("train_s"))
    world = number(row.get("world_size")) or 1
    batch = number(row.get("batch_size"))
    return steps * batch * world / seconds if steps and seconds and batch else None


def ok(rows: Iterable[Mapping]) -> list[Mapping]:
    """The runs that ended ok: the only ones any comparison reads a figure of."""
    return [r for r in rows if r.get("status") == "ok"]


def by_round(rows: Iterable[Mapping], measure: str) -> dict[int, float]:
    """A cell's values by round (its `repeat`), of its ok runs that have one."""
    return {int(r["repeat"]): v for r in ok(rows) if (v := measured(r, measure)) is not None}


def median(values: Iterable) -> float:
    """The median of the values that are numbers (NaN where none is)."""
    found = [x for x in (number(v) for v in values) if x is not None]
    return float(statistics.median(found)) if found else math.nan


def column_median(rows: Iterable[Mapping], measure: str) -> float | None:
    """The median of a measure over the ok runs that have it, None where none has."""
    found = [v for r in ok(rows) if (v := measured(r, measure)) is not None]
    return float(statistics.median(found)) if found else None


def asks_target(rows: Sequence[Mapping]) -> bool:
    """Whether the runs train to a target: under a time budget or stopping at it (a Run's or
    a frame row's `params`, a dict)."""
    return any(_param(r, "time_budget") or _param(r, "stop_at_target") for r in rows)


def _param(row: Mapping, name: str) -> bool:
    value = (row.get("params") or {}).get(name)
    return value not in (None, "", 0, 0.0, False)


SPEED, LEARNING = "speed", "learning"  # what a tune's lever changes (plan.levers)


def measure_of(rows: Sequence[Mapping], judged: str = "") -> str:
    """What the comparisons of these runs judge, one rule for every layer:

    - a lever that changes only speed (`judged=SPEED`: a tune's threads, precision...), or a
      question of the engine's windows (its caller says SPEED: every cell trains one window):
      samples/s;
    - a lever that changes what is learned (`judged=LEARNING`: a tune's batch): the time to
      target where every ok run reached it, else the validation metric after the same seconds;
    - a study's own comparisons: the time to target where its runs train to one (a time
      budget, stop_at_target) and two or more reached it (MLPerf's clock), else samples/s;
    - samples/s over every step (ALL_STEPS) where an ok run had no steady step to time.
    """
    done = ok(rows)
    reached = [r for r in done if number(r.get(TTT)) is not None]
    if judged == LEARNING:
        return TTT if done and len(reached) == len(done) else QUALITY
    if not judged and asks_target(rows) and len(reached) >= 2:
        return TTT
    return SPS if all(number(r.get(SPS)) is not None for r in done) else ALL_STEPS


def higher_is_better(measure: str) -> bool:
    return measure in HIGHER_IS_BETTER


@dataclass(frozen=True)
class Verdict:
    """One cell (or a tune's value) held against a reference on one measure. `ratio` is how many
    times better it is (> 1: better, whichever way the measure runs), paired by round with its
    95% interval where they share two rounds; `change` the relative change in the worse
    direction (+0.30: 30% worse); `kind` what a caller concluded (the gate's regression,
    inconclusive, unchanged, ok; a tune's kept); `note` why, in a few words."""

    subject: object  # a tune's value tried, the gate's cell in one line
    measure: str
    base: float = math.nan  # the reference's median
    new: float = math.nan  # this one's median
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    rounds: int = 0  # rounds paired
    change: float = math.nan
    significant: bool = False
    kind: str = ""
    repeats: tuple[int, int] = (0, 0)  # ok runs on the reference's side and this one's
    needs: int = 0  # where not significant: the rounds (or repeats a side) that could settle it
    # where paired and not significant: the rounds at which the two would look equal (within
    # MARGIN); CAP where the ratio itself lies outside the margin
    to_equal: int = 0
    note: str = ""
    samples_per_s: float | None = None  # a tune's value: its median samples/s beside its measure
    quality: float | None = None  # and its median validation metric (lower is better)

    @property
    def regression(self) -> bool:
        return self.kind == "regression"

    @property
    def better(self) -> bool:
        """Significantly better than the reference."""
        return self.significant and self.ratio is not None and self.ratio > 1


def judge(
    subject: object,
    measure: str,
    base: Mapping[object, float] | Sequence[float],
    new: Mapping[object, float] | Sequence[float],
    higher: bool | None = None,
) -> Verdict:
    """`new` held against `base` on `measure`: each side its values by round (a mapping, which
    pairs them where two rounds are shared) or its repeats (a sequence: unpaired). `higher`:
    whether more is better, where the measure's name does not say (a report's figure)."""
    a = list(base.values()) if isinstance(base, Mapping) else list(base)
    b = list(new.values()) if isinstance(new, Mapping) else list(new)
    higher = higher_is_better(measure) if higher is None else higher
    m_base, m_new = median(a), median(b)
    change = (
        math.nan
        if not (math.isfinite(m_base) and math.isfinite(m_new)) or m_base == 0
        else (m_base - m_new) / m_base
        if higher
        else (m_new - m_base) / m_base
    )
    common = set(base) & set(new) if isinstance(base, Mapping) and isinstance(new, Mapping) else ()
    if common:  # paired by round (one round: its ratio, no interval)
        ratio, low, high, n = paired(base, new, not higher)
        sig = low is not None and (low > 1 or high < 1)
        needs = 0 if sig else rounds_needed(base, new, not higher)
        # equality is symmetric: whichever way the measure is better, the margin is the same
        equal = 0 if sig else rounds_within(base, new, MARGIN, CAP)
        return Verdict(
            subject, measure, m_base, m_new, ratio, low, high, n, change, sig,
            repeats=(len(a), len(b)), needs=needs, to_equal=equal,
        )  # fmt: skip
    ratio = None
    if m_base > 0 and m_new > 0:
        ratio = m_new / m_base if higher else m_base / m_new
    sig = significant(a, b)
    return Verdict(
        subject, measure, m_base, m_new, ratio, None, None, len(common), change, sig,
        repeats=(len(a), len(b)),
    )  # fmt: skip


def wins_from(wins: Sequence[bool]) -> int | None:
    """The first index from which every value is True (the size from which a side wins at it
    and every larger size); None where the last is not."""
    start = None
    for i in range(len(wins) - 1, -1, -1):
        if not wins[i]:
            break
        start = i
    return start
