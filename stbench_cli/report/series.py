"""Which rows make one line of a plot, and how lines are named and split into panels (pure).

A line is one cell of the matrix: every key that identifies a cell (hardware label, strategy,
world size, batch size, epochs, the parameters that vary) is fixed along it except the x axis.
Repeats of that cell are its only rows that may be aggregated; two cells are never averaged
into one point. When a workload has many cells, the lines are split into panels by the
parameter with the fewest values until each panel holds few enough to read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .frame import keys_of, varying
from .stats import show


@dataclass(frozen=True)
class Line:
    name: str  # legend text: what sets this cell apart from the others in its panel
    rows: pd.DataFrame  # the rows of this cell (every x value and repeat)


@dataclass(frozen=True)
class Panel:
    title: str  # what is fixed in this panel and varies between panels ("" for one panel)
    lines: tuple[Line, ...]
    unnamed: str = ""  # the most common settings, which the line names leave out


def cell_keys(df: pd.DataFrame, x: str | None = None) -> list[str]:
    """The keys that vary between the cells of this frame, the x axis left out."""
    return [k for k in varying(df, keys_of(df)) if k != x]


def common(df: pd.DataFrame) -> str:
    """The settings every row here shares, for a caption: 'strategy=single, batch_size=75'
    (parameters these rows do not have, another workload's, are left out)."""
    fixed = [k for k in keys_of(df) if k in df.columns and k not in varying(df, keys_of(df)) and k != "label"]
    values = {k: show(df[k].iloc[0]) for k in fixed}
    return ", ".join(f"{k.removeprefix('p.')}={v}" for k, v in values.items() if v != "-")


def differ(df: pd.DataFrame, x: str | None = None) -> str:
    """What a caption names: only what varies between the cells drawn ('cells differ in
    batch_size, lr_scaling'); the settings they share are the study's command, said once above."""
    keys = ["device" if k == "label" else k.removeprefix("p.") for k in cell_keys(df, x)]
    return f"cells differ in {', '.join(keys)}" if keys else ""


def names(cells: pd.DataFrame, keys: list[str], spell_out: int = 3) -> tuple[list[str], str]:
    """Short unique names of cells (one row each), and what the names leave out.

    A name is the hardware and the values of the keys that vary. With more than `spell_out`
    such keys, only the values that differ from their key's most common value are named and
    the most common values are returned for a caption; two different cells differ in some
    key where one of them is off the most common value, so the names stay unique."""
    params = [k for k in keys if k != "label"]
    modes = {k: cells[k].astype(str).mode().iloc[0] for k in params}
    short = len(params) > spell_out
    out = []
    for _, row in cells.iterrows():
        parts = [f"{k.removeprefix('p.')}={show(row[k])}" for k in params if not short or str(row[k]) != modes[k]]
        if "label" in keys or not parts:  # the hardware where it varies, or where nothing else names the cell
            parts.insert(0, show(row["label"]))
        out.append(", ".join(parts))
    left_out = ", ".join(f"{k.removeprefix('p.')}={v or chr(34) * 2}" for k, v in modes.items()) if short else ""
    return out, left_out


def panels(df: pd.DataFrame, x: str | None, max_lines: int = 6, max_panels: int = 6) -> list[Panel]:
    """The cells of df as lines along x, split into panels of at most max_lines where a key
    (never the hardware) can split them into at most max_panels. Line names are given over all panels at once, so a
    name (and its colour in a figure's one legend) means the same cell in every panel."""
    keys = cell_keys(df, x)
    facet: list[str] = []
    while _widest(df, facet, keys) > max_lines:
        options = [k for k in keys if k != "label" and k not in facet]
        options = [k for k in options if _count(df, facet + [k]) <= max_panels]
        if not options:
            break
        facet.append(min(options, key=lambda k: (_widest(df, facet + [k], keys), df[k].astype(str).nunique())))
    cells = _groups(df, keys)
    line_names, unnamed = names(pd.DataFrame([c.iloc[0] for _, c in cells]), keys)
    by_key = {str(k): n for (k, _), n in zip(cells, line_names)}
    out = []
    for title_values, g in _groups(df, facet):
        lines = tuple(Line(by_key[str(k)], c) for k, c in _groups(g, keys))
        title = ", ".join(f"{k.removeprefix('p.')}={show(v)}" for k, v in zip(facet, title_values))
        out.append(Panel(title, lines, unnamed))
    return out


def _widest(df: pd.DataFrame, facet: list[str], keys: list[str]) -> int:
    """The most lines one panel holds when df is split by the facet keys (counted on the keys'
    distinct values: splitting the frame into every group took a minute for a 24-cell study)."""
    inner = [k for k in keys if k not in facet]
    if not facet or not inner:
        return _count(df, inner)
    distinct = df[facet + inner].astype(str).drop_duplicates()
    return int(distinct.groupby(facet).size().max())


def _count(df: pd.DataFrame, keys: list[str]) -> int:
    """How many groups `keys` split df into (missing values a group of their own, as _groups has it)."""
    return len(df[keys].astype(str).drop_duplicates()) if keys else 1


def _groups(df: pd.DataFrame, keys: list[str]) -> list[tuple[tuple, pd.DataFrame]]:
    if not keys:
        return [((), df)]
    return [(k if isinstance(k, tuple) else (k,), g) for k, g in df.groupby(keys, sort=True, dropna=False)]


def spread(df: pd.DataFrame, x: str, least: int = 2) -> pd.DataFrame:
    """The rows of the cells run at `least` or more values of x (a line needs two points)."""
    keys = cell_keys(df, x)
    if df.empty:
        return df
    counts = df.groupby(keys, dropna=False)[x].transform("nunique") if keys else df[x].nunique()
    return df[counts >= least] if keys else (df if counts >= least else df.iloc[:0])


def medians(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per x value of one cell: the median of y over its repeats, with the lowest and highest
    repeat (what an error bar of this cell shows)."""
    g = rows.dropna(subset=[y]).groupby(x, sort=True)[y]
    return pd.DataFrame({"median": g.median(), "low": g.min(), "high": g.max(), "n": g.count()})
