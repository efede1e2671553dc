"""Repeats to medians, intervals and significance; numbers and ratios as text (pure).

Repeats are aggregated to a median with a 95% interval (Student t on the repeats' mean,
so it needs >= 2 repeats). A ratio between two cells is called significant only when both
have >= 2 repeats, their intervals do not overlap and a Welch t-test gives p < 0.05;
otherwise it is printed as "not significant".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

HIGHER_IS_BETTER = {"samples_per_s", "steps_per_s", "achieved_gflops", "peak_fraction", "val_value_gain"}


def ci95(values: list[float]) -> tuple[float, float]:
    """95% t-interval of the mean; NaNs with fewer than two values."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return math.nan, math.nan
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)


def significant(a: list[float], b: list[float]) -> bool:
    if len(a) < 2 or len(b) < 2:
        return False
    (alo, ahi), (blo, bhi) = ci95(a), ci95(b)
    if alo <= bhi and blo <= ahi:
        return False
    if np.std(a) == 0 and np.std(b) == 0:
        return True  # identical repeats on each side, different values
    return bool(stats.ttest_ind(a, b, equal_var=False).pvalue < 0.05)


def repeats_needed(a: list[float], b: list[float], cap: int = 1000) -> int:
    """The fewest repeats per side at which `significant` could say yes, were the means and
    spreads measured to stay: the n where the two 95% intervals stop overlapping (with n on
    each side that also puts Welch's p below 0.05, so it is the stricter of the two tests).
    It is asked where the test said no, so it is always more than the smaller side has now. A side with one value borrows the other's
    spread; with no spread measured at all it is 2, the test's floor. `cap` where the means
    do not differ."""
    spreads = [float(np.std(v, ddof=1)) for v in (a, b) if len(v) >= 2]
    have = min(len(a), len(b))
    if not spreads or have == 0:
        return max(2, have + 1)
    spread = sum(spreads) * (2 / len(spreads))  # s_a + s_b, a lone value's side taking the other's
    gap = abs(float(np.mean(a)) - float(np.mean(b)))
    n = np.arange(2, cap + 1)
    enough = n[stats.t.ppf(0.975, n - 1) * spread / np.sqrt(n) < gap]
    return max(int(enough[0]) if len(enough) else cap, have + 1)


def format_number(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def format_cell(row) -> str:
    if row["n"] == 0:
        return row["status"]
    text = format_number(row["median"])
    if row["n"] >= 2:
        text += f" ± {format_number((row['hi'] - row['lo']) / 2)}"
    if row["n"] < row["n_all"]:
        text += f" ({row['n']}/{row['n_all']} ok)"
    return text


def format_ratio(r: float, better: str = "faster", worse: str = "slower") -> str:
    """pyperf's wording: how many times better or worse than the baseline."""
    if not math.isfinite(r) or r <= 0:
        return "-"
    if r == 1.0:
        return "same"
    return f"{r:.2f}x {better}" if r > 1 else f"{1 / r:.2f}x {worse}"


def ratio_text(metric: str, base, other) -> str:
    if base is None or other is None or base["n"] == 0 or other["n"] == 0:
        return "-"
    higher = metric in HIGHER_IS_BETTER
    r = other["median"] / base["median"] if higher else base["median"] / other["median"]
    words = ("faster", "slower") if metric.endswith("_s") or metric == "samples_per_s" else ("better", "worse")
    text = format_ratio(r, *words)
    if not significant(base["values"], other["values"]):
        text += " (not significant)"
    return text


def show(value) -> str:
    """A table key as text: '-' where a row has no value, '""' for an empty text."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(value) if value != "" else '""'
