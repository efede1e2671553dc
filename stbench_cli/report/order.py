"""Labels in the order a reader expects: numbers inside text compared as numbers, so that
grid=30x84 comes before 180x360 and size=2k7 before 11k (pure)."""

from __future__ import annotations

import math
import re

import pandas as pd

_PIECES = re.compile(r"(\d+(?:\.\d+)?)")


def natural(value) -> tuple:
    """A sort key: each run of digits a number, the text between it text ('-' and missing
    values last)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ((2, ""),)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ((0, float(value)),)
    text = str(value)
    if text == "-":
        return ((2, ""),)
    return tuple((0, float(p)) if i % 2 else (1, p) for i, p in enumerate(_PIECES.split(text)) if p != "")


def sort_natural(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The table's rows ordered by its key columns, each in natural order; its attrs kept."""
    keys = [k for k in keys if k in table.columns]
    if not keys or table.empty:
        return table
    order = sorted(range(len(table)), key=lambda i: tuple(natural(table[k].iloc[i]) for k in keys))
    out = table.iloc[order].reset_index(drop=True)
    out.attrs = dict(table.attrs)
    return out


def size_of(label) -> float:
    """A problem-size label as a number: 30x84 -> 2520 (the product), 2k7 -> 2700, 11k ->
    11000, 1.5M -> 1.5e6, 400000 -> 400000; NaN where it is not a size."""
    text = str(label).strip().lower()
    if "x" in text:
        parts = [size_of(p) for p in text.split("x")]
        return math.prod(parts) if parts and all(math.isfinite(p) for p in parts) else math.nan
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([km])?(\d*)", text)
    if not found:
        return math.nan
    whole, unit, frac = found.groups()
    scale = {"k": 1e3, "m": 1e6, None: 1.0}[unit]
    return float(f"{whole}.{frac}" if frac and "." not in whole else whole) * scale
