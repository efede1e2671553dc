"""The statistics every layer judges with (pure: numbers in, numbers out): a 95% interval of a
mean, whether two samples differ, the repeats that could tell them apart, and the paired
comparison of two cells round by round.

Repeats run as a study's outer loop (every cell of round r before any of round r + 1), so two
cells of one round saw the same machine. On a machine whose speed drifts, the ratio of each
round's pair varies far less than either cell does: `paired` states the geometric mean of the
per-round ratios with a t-interval on their logs, where the unpaired test (`significant`) would
see only overlapping intervals. `stbench tune` judges its steps so (plan.judge), and the report
compares two cells of one result folder so (report.cells).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

import numpy as np
from scipy.special import stdtrit  # the t quantile; scipy.stats itself takes 1.3 s to import


def t_quantile(q: float, df):
    """The t distribution's q quantile with df degrees of freedom (scipy.stats.t.ppf)."""
    return stdtrit(df, q)


def ci95(values: list[float]) -> tuple[float, float]:
    """95% t-interval of the mean; NaNs with fewer than two values."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return math.nan, math.nan
    half = t_quantile(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)


def significant(a: list[float], b: list[float]) -> bool:
    """Whether two independent samples differ: both have >= 2 values, their 95% intervals do not
    overlap and Welch's t-test gives p < 0.05."""
    if len(a) < 2 or len(b) < 2:
        return False
    (alo, ahi), (blo, bhi) = ci95(a), ci95(b)
    if alo <= bhi and blo <= ahi:
        return False
    if np.std(a) == 0 and np.std(b) == 0:
        return True  # identical repeats on each side, different values
    from scipy.stats import ttest_ind  # here only: most studies never get this far

    return bool(ttest_ind(a, b, equal_var=False).pvalue < 0.05)


def repeats_needed(a: list[float], b: list[float], cap: int = 1000) -> int:
    """The fewest repeats per side at which `significant` could say yes, were the means and
    spreads measured to stay: the n where the two 95% intervals stop overlapping (with n on
    each side that also puts Welch's p below 0.05, so it is the stricter of the two tests).
    It is asked where the test said no, so it is always more than the smaller side has now. A
    side with one value borrows the other's spread; with no spread measured at all it is 2, the
    test's floor. `cap` where the means do not differ."""
    spreads = [float(np.std(v, ddof=1)) for v in (a, b) if len(v) >= 2]
    have = min(len(a), len(b))
    if not spreads or have == 0:
        return max(2, have + 1)
    spread = sum(spreads) * (2 / len(spreads))  # s_a + s_b, a lone value's side taking the other's
    gap = abs(float(np.mean(a)) - float(np.mean(b)))
    n = np.arange(2, cap + 1)
    enough = n[t_quantile(0.975, n - 1) * spread / np.sqrt(n) < gap]
    return max(int(enough[0]) if len(enough) else cap, have + 1)


def repeats_for_width(values: list[float], width: float, cap: int = 100) -> int:
    """The fewest repeats (at least 3) at which the 95% interval of the mean would be narrower
    than `width`, were the spread measured to stay; `cap` where no count would do."""
    spread = float(np.std(values, ddof=1)) if len(values) >= 2 else 0.0
    n = np.arange(3, cap + 1)
    enough = n[2 * t_quantile(0.975, n - 1) * spread / np.sqrt(n) < width]
    return int(enough[0]) if len(enough) else cap


def _logs(reference: Mapping, other: Mapping, lower_better: bool) -> list[float]:
    """The log of `other` over `reference` in each round both have (> 0: `other` is better)."""
    return [
        math.log(reference[r] / other[r] if lower_better else other[r] / reference[r])
        for r in sorted(set(reference) & set(other))
        if reference[r] > 0 and other[r] > 0
    ]


def paired(reference: Mapping, other: Mapping, lower_better: bool):
    """(ratio, low, high, rounds) of `other` over `reference`, each a value per round: the
    geometric mean of the per-round ratios and its 95% interval; > 1 is better."""
    logs = _logs(reference, other, lower_better)
    if not logs:
        return None, None, None, 0
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None, 1
    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs)


def rounds_within(reference: Mapping, other: Mapping, margin: float, cap: int = 1000) -> int:
    """The fewest common rounds at which `paired`'s interval would lie inside 1 -/+ `margin`
    (the two look equal), were the per-round ratios' mean and spread measured to stay; `cap`
    where the mean ratio itself lies outside the margin (no count of rounds would do)."""
    logs = _logs(reference, other, False)
    if len(logs) < 2:
        return max(2, len(logs) + 1)
    mean, spread = statistics.fmean(logs), statistics.stdev(logs)
    room = min(mean - math.log(1 - margin), math.log(1 + margin) - mean)
    if room <= 0:
        return cap
    return max(_fewest_rounds(spread, room, cap), len(logs) + 1)


def rounds_needed(reference: Mapping, other: Mapping, lower_better: bool, cap: int = 1000) -> int:
    """The fewest common rounds at which `paired`'s interval would leave 1, were the per-round
    ratios' mean and spread measured to stay (as `repeats_needed` for independent samples);
    more than the rounds there are, `cap` where the mean ratio is 1."""
    logs = _logs(reference, other, lower_better)
    if len(logs) < 2:
        return max(2, len(logs) + 1)
    gap, spread = abs(statistics.fmean(logs)), statistics.stdev(logs)
    return max(_fewest_rounds(spread, gap, cap), len(logs) + 1)


def _fewest_rounds(spread: float, half_width: float, cap: int) -> int:
    """The fewest rounds (2 to cap) at which a mean of logs with this spread has a 95% interval
    narrower than `half_width` on each side; `cap` where none has."""
    n = np.arange(2, cap + 1)
    enough = n[t_quantile(0.975, n - 1) * spread / np.sqrt(n) < half_width]
    return int(enough[0]) if len(enough) else cap
