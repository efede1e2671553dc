"""The pieces every finding is built from (pure): a study's cells with their repeats, the
words for one cell against another (pyperf's "1.23x faster", and "no significant difference"
where the 95% intervals overlap, never a winner), a straight-line fit with its interval, and
the memory a study measured."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..frame import keys_of, varying
from ..order import natural
from ..stats import ci95, format_number, format_ratio, show, significant


@dataclass(frozen=True)
class Cell:
    """One cell of a study: its name (what sets it apart) and the ok values of one figure."""

    name: str
    values: tuple[float, ...]
    key: tuple = ()  # its key values, in the order of the keys it was grouped by

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else math.nan

    @property
    def half(self) -> float:
        """Half-width of the 95% interval (NaN with fewer than two values)."""
        lo, hi = ci95(list(self.values))
        return (hi - lo) / 2

    def amount(self, unit: str = "") -> str:
        """'12,345 ± 678 unit' (the ± only where there are repeats)."""
        text = format_number(self.median)
        if len(self.values) >= 2:
            text += f" ± {format_number(self.half)}"
        return f"{text} {unit}".rstrip()


def axes(s: pd.DataFrame) -> list[str]:
    """What the study varies (hardware as `label`, the cell keys, the `p.` parameters)."""
    return varying(s, keys_of(s))


def short(key: str) -> str:
    return key.removeprefix("p.")


def name(keys: list[str], values) -> str:
    """A cell's name from its key values: 'batch_size=75, lr_scaling=none' (hardware by its label)."""
    return ", ".join(show(v) if k == "label" else f"{short(k)}={show(v)}" for k, v in zip(keys, values))


def ok(s: pd.DataFrame) -> pd.DataFrame:
    return s[s["status"] == "ok"]


def cells(s: pd.DataFrame, metric: str, keys: list[str]) -> list[Cell]:
    """The ok cells of these rows by `keys`, in natural order, with their values of `metric`."""
    rows = ok(s)
    if metric not in rows.columns:
        return []
    if not keys:
        values = tuple(rows[metric].dropna().astype(float))
        return [Cell("", values)] if values else []
    out = []
    for key, g in rows.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        values = tuple(g[metric].dropna().astype(float))
        if values:
            out.append(Cell(name(keys, key), values, key))
    return sorted(out, key=lambda c: tuple(natural(v) for v in c.key))


def not_ok(s: pd.DataFrame, keys: list[str]) -> list[str]:
    """'name (status)' of each cell with no ok run (skipped, failed, oom, ...)."""
    out = []
    for key, g in s.groupby(keys, sort=False, dropna=False) if keys else []:
        if not (g["status"] == "ok").any():
            key = key if isinstance(key, tuple) else (key,)
            out.append((tuple(natural(v) for v in key), f"{name(keys, key)} ({'/'.join(sorted(set(g['status'])))})"))
    return [text for _, text in sorted(out)]


def ratio(base: Cell, other: Cell, higher_is_better: bool = True) -> float:
    """How many times better `other` is than `base` (> 1 better)."""
    if not (base.median > 0 and other.median > 0):
        return math.nan
    return other.median / base.median if higher_is_better else base.median / other.median


def contrast(base: Cell, other: Cell, unit: str = "", higher_is_better: bool = True,
             words: tuple[str, str] = ("faster", "slower"), amounts: bool = True, note: bool = True) -> str:
    """`other` against `base` in words: '1.25x faster (12 ± 1 vs 9.6 ± 0.5 unit)'; 'no
    significant difference (...)' where the 95% intervals overlap; with fewer than two runs on
    a side, the ratio and (unless `note` is False: the sentence says it once) 'one run per
    cell: no interval'."""
    r = ratio(base, other, higher_is_better)
    shown = f"{other.amount()} vs {base.amount(unit)}" if amounts else ""
    if len(base.values) < 2 or len(other.values) < 2:
        said = "; ".join(p for p in (shown, "one run per cell: no interval" if note else "") if p)
        return format_ratio(r, *words) + (f" ({said})" if said else "")
    if not significant(list(base.values), list(other.values)):
        return "no significant difference" + (f" ({shown})" if shown else "")
    return format_ratio(r, *words) + (f" ({shown})" if shown else "")


def differs(base: Cell, other: Cell) -> bool:
    """Whether two cells differ beyond doubt: both have repeats and their intervals are apart."""
    return len(base.values) >= 2 and len(other.values) >= 2 and significant(list(base.values), list(other.values))


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
    f = sps.linregress(x, y)
    if len(x) < 3:
        return Fit(float(f.slope), float(f.intercept), (math.nan, math.nan), (math.nan, math.nan), len(x))
    t = sps.t.ppf(0.975, len(x) - 2)
    return Fit(float(f.slope), float(f.intercept), (f.slope - t * f.stderr, f.slope + t * f.stderr),
               (f.intercept - t * f.intercept_stderr, f.intercept + t * f.intercept_stderr), len(x))


def interval(lo: float, hi: float, unit: str = "", fmt=format_number) -> str:
    """'95% CI 1.20 to 1.50 unit', or '' where there is no interval."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f"95% CI {fmt(lo)} to {fmt(hi)}{(' ' + unit) if unit else ''}"


def one_run(*cells: Cell) -> bool:
    """Whether some cell has fewer than two runs (no interval, so no significance)."""
    return any(len(c.values) < 2 for c in cells)


PARTS = ("param_mb", "grad_mb", "optim_state_mb", "activation_peak_mb")


def _cuda(s: pd.DataFrame) -> bool:
    return "peak_gpu_mb" in s.columns and s["peak_gpu_mb"].notna().any()


def peak_memory(s: pd.DataFrame) -> tuple[pd.Series, str]:
    """The process's peak memory and its name: the GPU's peak where one was measured, else RSS."""
    if _cuda(s):
        return s["peak_gpu_mb"], "peak GPU memory"
    return s.get("peak_rss_mb", pd.Series(math.nan, index=s.index)), "peak RSS"


def rank_memory(s: pd.DataFrame) -> tuple[pd.Series, str]:
    """Memory per rank as a strategy changes it: the GPU's peak, else the parameters, gradients,
    optimizer state and activation peak a rank holds (counted where the rows have them: a CPU
    process's RSS hides them under the data and the runtime), else the peak RSS."""
    if not _cuda(s) and all(c in s.columns for c in PARTS) and s["param_mb"].notna().any():
        return s[list(PARTS)].sum(axis=1, min_count=1), "model state + activations"
    return peak_memory(s)
