"""A study's cells and their repeats (pure): the one aggregation of a figure over a cell's
repeats (median, 95% interval, how many ended ok), significance, the words for one cell against
another (pyperf's "1.23x faster", and "no significant difference" where the 95% intervals
overlap, never a winner), and a straight line fitted with its interval.

A cell's 95% interval is Student's t on its repeats' mean, so it needs >= 2 repeats. Two cells
of one result folder that ran >= 2 common rounds (the `repeat` column: repeats run as the
study's outer loop, so a round's cells saw the same machine) are compared pair by pair: the
geometric mean of the per-round ratios and its 95% interval (stbench.stats.paired), "paired
over N rounds", and where that interval holds 1, the rounds a conclusion needs. Other cells
differ significantly only when both have >= 2 repeats, their intervals do not overlap and
Welch's t-test gives p < 0.05; a ratio is otherwise printed as "not significant".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ..comparison import HIGHER_IS_BETTER  # noqa: F401  (tables, judge: one set)
from ..comparison import judge as compare
from ..stats import ci95, significant, t_quantile
from .labels import format_number, format_ratio, natural, show
from .model import Key, columns, name_of


@dataclass(frozen=True)
class Cell:
    """One cell of a study (one setting of its keys) and one figure over its repeats."""

    key: tuple = ()  # its key values, in the order of the keys it was grouped by
    name: str = ""  # what sets it apart: 'batch_size=75, lr_scaling=none'
    values: tuple[float, ...] = ()  # the figure of each run that ended ok
    statuses: tuple[str, ...] = ()  # how each of its runs ended
    rounds: tuple[tuple[str, int], ...] = ()  # each value's (result folder, repeat)

    @cached_property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else math.nan

    @cached_property
    def per_round(self) -> dict[tuple[str, int], float]:
        """Its values by round (result folder, repeat), where each round has one ({}
        otherwise: nothing to pair)."""
        found = dict(zip(self.rounds, self.values))
        return found if len(found) == len(self.values) else {}

    @cached_property
    def interval(self) -> tuple[float, float]:
        """The 95% interval of the mean (NaN with fewer than two values)."""
        return ci95(list(self.values))

    @property
    def half(self) -> float:
        """Half-width of the 95% interval."""
        return (self.interval[1] - self.interval[0]) / 2

    @property
    def shown(self) -> tuple[str, ...]:
        """Its key as a table shows it (what finds it again: a missing value is not equal to
        itself, its text "-" is)."""
        return tuple(show(v) for v in self.key)

    @property
    def status(self) -> str:
        """'ok', or how its runs that are not ok ended ('oom', 'failed/timeout')."""
        return "/".join(sorted(set(self.statuses) - {"ok"})) or "ok"

    def amount(self, unit: str = "") -> str:
        """'12,345 ± 678 unit' (the ± only where there are repeats)."""
        text = format_number(self.median)
        if len(self.values) >= 2:
            text += f" ± {format_number(self.half)}"
        return f"{text} {unit}".rstrip()

    def text(self) -> str:
        """As a table shows it: the amount and, where some runs did not end ok, how many did;
        its status where none did."""
        if not self.values:
            return self.status
        shown = self.amount()
        return shown + (
            f" ({len(self.values)}/{len(self.statuses)} ok)"
            if len(self.values) < len(self.statuses)
            else ""
        )


def cells(
    df: pd.DataFrame, metric: str | None, keys: Sequence[Key], every: bool = False
) -> list[Cell]:
    """The cells of these rows by `keys`, in natural order, with the ok runs' values of
    `metric`; with `every`, also the cells with none (a failed cell, a figure not measured).
    Without a metric: every cell, with its runs' statuses."""
    if metric is not None and metric not in df.columns:
        return []
    out = []
    in_rounds = {"study", "repeat"} <= set(df.columns)  # hand-made frames may lack them
    for key, g in groups(df, keys):
        ok = g[g["status"] == "ok"][metric].dropna() if metric else pd.Series(dtype=float)
        rounds = zip(g.loc[ok.index, "study"], g.loc[ok.index, "repeat"]) if in_rounds else ()
        values, statuses = tuple(ok.astype(float)), tuple(g["status"])
        cell = Cell(key, name_of(keys, key), values, statuses, tuple(rounds))
        if cell.values or every or metric is None:
            out.append(cell)
    return out


def groups(
    df: pd.DataFrame, keys: Sequence[Key], ordered: bool = True
) -> list[tuple[tuple, pd.DataFrame]]:
    """The rows of each cell by `keys` (a missing value a key of its own), in natural order of
    the keys, or as the cells first appear."""
    if not keys:
        return [((), df)]
    found = [
        (k if isinstance(k, tuple) else (k,), g)
        for k, g in df.groupby(columns(keys), sort=False, dropna=False)
    ]
    return sorted(found, key=lambda kg: tuple(natural(v) for v in kg[0])) if ordered else found


def rows_of(df: pd.DataFrame, keys: Sequence[Key], cell: Cell) -> pd.DataFrame:
    """The rows of one cell (grouped by these keys), found by its key as a table shows it."""
    found = pd.Series(True, index=df.index)
    for k, value in zip(keys, cell.shown):
        found &= df[k.column].map(show) == value
    return df[found]


def not_ok(df: pd.DataFrame, keys: Sequence[Key]) -> list[str]:
    """'name (status)' of each cell with no ok run (skipped, failed, oom, ...)."""
    return (
        [
            f"{c.name} ({c.status})"
            for c in cells(df, None, keys, every=True)
            if "ok" not in c.statuses
        ]
        if keys
        else []
    )


def ratio(base: Cell, other: Cell, higher_is_better: bool = True) -> float:
    """How many times better `other` is than `base` (> 1 better)."""
    if not (base.median > 0 and other.median > 0):
        return math.nan
    return other.median / base.median if higher_is_better else base.median / other.median


def paired_rounds(base: Cell, other: Cell, higher_is_better: bool = True):
    """(ratio, low, high, rounds) of `other` over `base` paired by round, where they share >= 2
    rounds of one result folder (comparison.judge); None otherwise."""
    a, b = base.per_round, other.per_round
    if len(a.keys() & b.keys()) < 2:
        return None
    v = compare("", "", a, b, higher=higher_is_better)
    return (v.ratio, v.low, v.high, v.rounds) if v.low is not None else None


def differs(base: Cell, other: Cell) -> bool:
    """Whether two cells differ beyond doubt: paired by round, the interval of the per-round
    ratio leaves 1; unpaired, both have repeats and their intervals are apart."""
    p = paired_rounds(base, other)
    if p is not None:
        return p[1] > 1 or p[2] < 1
    return not one_run(base, other) and significant(list(base.values), list(other.values))


def one_run(*shown: Cell) -> bool:
    """Whether some cell has fewer than two runs (no interval, so no significance)."""
    return any(len(c.values) < 2 for c in shown)


def contrast(
    base: Cell,
    other: Cell,
    unit: str = "",
    higher_is_better: bool = True,
    words: tuple[str, str] = ("faster", "slower"),
    amounts: bool = True,
    note: bool = True,
) -> str:
    """`other` against `base` in words: '1.25x faster (12 ± 1 vs 9.6 ± 0.5 unit)'; 'no
    significant difference (...)' where the 95% intervals overlap; with fewer than two runs on
    a side, the ratio and (unless `note` is False: the sentence says it once) 'one run per
    cell: no interval'; paired by round where they can be (`paired_rounds`)."""
    r = ratio(base, other, higher_is_better)
    shown = f"{other.amount()} vs {base.amount(unit)}" if amounts else ""
    if one_run(base, other):
        said = "; ".join(p for p in (shown, "one run per cell: no interval" if note else "") if p)
        return format_ratio(r, *words) + (f" ({said})" if said else "")
    p = paired_rounds(base, other, higher_is_better)
    if p is not None:
        return _paired_words(base, other, p, higher_is_better, words, shown)
    if not significant(list(base.values), list(other.values)):
        return "no significant difference" + (f" ({shown})" if shown else "")
    return format_ratio(r, *words) + (f" ({shown})" if shown else "")


def _paired_words(
    base: Cell, other: Cell, p, higher: bool, words: tuple[str, str], shown: str
) -> str:
    """'1.25x faster (paired over 3 rounds, 95% CI 1.20x to 1.31x; ...)', the interval read as
    the words read (of 'slower': the inverse); where it holds 1, the rounds a conclusion needs."""
    r, lo, hi, n = p
    a, b = (lo, hi) if r >= 1 else (1 / hi, 1 / lo)
    said = f"paired over {n} rounds, 95% CI {a:.2f}x to {b:.2f}x"
    if lo > 1 or hi < 1:
        return format_ratio(r, *words) + f" ({'; '.join(x for x in (said, shown) if x)})"
    needs = compare("", "", base.per_round, other.per_round, higher=higher).needs
    said = f"{format_ratio(r, *words)}, {said}: a conclusion needs ≥ {needs} rounds"
    return f"no significant difference ({'; '.join(x for x in (said, shown) if x)})"


def against(
    base: Cell | None, other: Cell | None, higher_is_better: bool, words: tuple[str, str]
) -> str:
    """A table's ratio column: '1.25x faster', '(not significant)' added where the 95%
    intervals overlap or a side has one run; '-' where a side has no value."""
    if base is None or other is None or not base.values or not other.values:
        return "-"
    text = format_ratio(ratio(base, other, higher_is_better), *words)
    return text if differs(base, other) else text + " (not significant)"


@dataclass(frozen=True)
class Fit:
    """y = intercept + slope * x by least squares, with 95% intervals (NaN below 3 points)."""

    slope: float
    intercept: float
    slope_ci: tuple[float, float]
    intercept_ci: tuple[float, float]
    n: int


def fit_line(x, y) -> Fit | None:
    """The least-squares line through the points; None where x does not vary."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 2 or np.ptp(x) == 0:
        return None
    from scipy.stats import linregress  # here only: importing scipy.stats takes 1.3 s

    f = linregress(x, y)
    if len(x) < 3:
        nan = (math.nan, math.nan)
        return Fit(float(f.slope), float(f.intercept), nan, nan, len(x))
    t = t_quantile(0.975, len(x) - 2)
    return Fit(
        float(f.slope),
        float(f.intercept),
        (f.slope - t * f.stderr, f.slope + t * f.stderr),
        (f.intercept - t * f.intercept_stderr, f.intercept + t * f.intercept_stderr),
        len(x),
    )


def interval(lo: float, hi: float, unit: str = "", fmt=format_number) -> str:
    """'95% CI 1.20 to 1.50 unit', or '' where there is no interval."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f"95% CI {fmt(lo)} to {fmt(hi)}{(' ' + unit) if unit else ''}"


def without(keys: Sequence[Key], *names: str) -> list[Key]:
    """The keys but those named (by column or name); the hardware stays unless named."""
    return [k for k in keys if k.column not in names and k.name not in names]
