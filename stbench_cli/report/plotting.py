"""How every stbench figure is laid out and looks (pure: rows in, PNG bytes out): which rows
make one line, how lines are named and split into panels, a colour-blind-safe palette, markers
that tell lines apart in grey print too, panels in a grid and legends below the plot.

A line is one cell of the matrix: every key that identifies a cell (report.model.axes) is fixed
along it except the x axis. Repeats of that cell are its only rows that may be aggregated; two
cells are never averaged into one point. When a study has many cells, the lines are split into
panels by the key with the fewest values until each panel holds few enough to read.
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # headless: no display is ever needed
import matplotlib.pyplot as plt  # noqa: E402

from .labels import show  # noqa: E402
from .model import HARDWARE, Key, axes, columns, name_of  # noqa: E402

# Okabe & Ito's palette (safe for the common colour-vision deficiencies), the yellow last
# because it reads poorly on white.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
PHASE_COLOURS = {
    "data": "#E69F00",
    "h2d": "#56B4E9",
    "compute": "#0072B2",
    "sync": "#D55E00",
    "eval": "#009E73",
}
DPI = 110


def look(i: int) -> dict:
    """Colour and marker of the i-th line of a figure."""
    return {
        "color": PALETTE[i % len(PALETTE)],
        "marker": MARKERS[(i // len(PALETTE) + i) % len(MARKERS)],
    }


def grid(n: int, per_row: int = 2, size: tuple[float, float] = (5.2, 3.6)):
    """A figure of n panels, per_row across (constrained layout, so labels, titles and a
    legend below never overlap or fall off the edge); unused grid cells are removed."""
    cols = min(n, per_row)
    rows = math.ceil(n / cols)
    fig, panes = plt.subplots(
        rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False, layout="constrained"
    )
    flat = list(panes.flat)
    for ax in flat[n:]:
        ax.remove()
    for ax in flat[:n]:
        ax.grid(True, alpha=0.3)
    return fig, flat[:n]


def legend_below(fig, entries: dict[str, object], title: str = "") -> None:
    """One legend for the whole figure, below the panels (names can be long)."""
    if not entries:
        return
    fig.legend(
        list(entries.values()),
        list(entries.keys()),
        loc="outside lower center",
        ncol=len(entries)
        if sum(map(len, entries)) <= 90
        else 1
        if max(map(len, entries)) > 45
        else 2,
        frameon=False,
        fontsize=8,
        title=textwrap.fill(title, int(fig.get_figwidth() * 15)) or None,
        title_fontsize=8,
    )


def png(fig) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def from_zero(ax) -> None:
    """Start the y axis at zero, with a little room so points on zero stay whole."""
    top = ax.get_ylim()[1]
    ax.set_ylim(-0.03 * top, top)


@dataclass(frozen=True)
class Picture:
    name: str  # file stem, e.g. "cnn-strain-time-vs-epochs"
    title: str
    caption: str
    png: bytes


def caption(*parts: str) -> str:
    return "; ".join(p for p in parts if p) + "."


@dataclass(frozen=True)
class Line:
    name: str  # legend text: what sets this cell apart from the others in its panel
    rows: pd.DataFrame  # the rows of this cell (every x value and repeat)


@dataclass(frozen=True)
class Panel:
    title: str  # what is fixed in this panel and varies between panels ("" for one panel)
    lines: tuple[Line, ...]
    unnamed: str = ""  # the most common settings, which the line names leave out


def cell_keys(df: pd.DataFrame, x: str | None = None) -> list[Key]:
    """The keys that vary between the cells of these rows, the x axis left out."""
    return [k for k in axes(df) if k.column != x]


def differ(df: pd.DataFrame, x: str | None = None) -> str:
    """What a caption names: only what varies between the cells drawn ('cells differ in
    batch_size, lr_scaling'); the settings they share are the study's command, said once above."""
    keys = [k.name for k in cell_keys(df, x)]
    return f"cells differ in {', '.join(keys)}" if keys else ""


def short_names(cells: pd.DataFrame, keys: list[Key], spell_out: int = 3) -> tuple[list[str], str]:
    """Short unique names of cells (one row each), and what the names leave out.

    A name is the hardware and the values of the keys that vary. With more than `spell_out`
    such keys, only the values that differ from their key's most common value are named and
    the most common values are returned for a caption; two different cells differ in some
    key where one of them is off the most common value, so the names stay unique."""
    params = [k for k in keys if k != HARDWARE]
    modes = {k: cells[k.column].astype(str).mode().iloc[0] for k in params}
    short = len(params) > spell_out
    out = []
    for _, row in cells.iterrows():
        named = [k for k in params if not short or str(row[k.column]) != modes[k]]
        parts = [name_of([k], [row[k.column]]) for k in named]
        if HARDWARE in keys or not parts:  # the hardware where it varies, or where nothing else
            parts.insert(0, show(row[HARDWARE.column]))  # names the cell
        out.append(", ".join(parts))
    left_out = ", ".join(f"{k.name}={v or chr(34) * 2}" for k, v in modes.items()) if short else ""
    return out, left_out


def panels(df: pd.DataFrame, x: str | None, max_lines: int = 6, max_panels: int = 6) -> list[Panel]:
    """The cells of df as lines along x, split into panels of at most max_lines where a key
    (never the hardware) can split them into at most max_panels. Line names are given over all
    panels at once, so a name (and its colour in a figure's one legend) means the same cell in
    every panel."""
    keys = cell_keys(df, x)
    facet: list[Key] = []
    while _widest(df, facet, keys) > max_lines:
        options = [k for k in keys if k != HARDWARE and k not in facet]
        options = [k for k in options if _group_count(df, facet + [k]) <= max_panels]
        if not options:
            break
        facet.append(
            min(
                options,
                key=lambda k: (_widest(df, facet + [k], keys), df[k.column].astype(str).nunique()),
            )
        )
    cells = _groups(df, keys)
    line_names, unnamed = short_names(pd.DataFrame([c.iloc[0] for _, c in cells]), keys)
    by_key = {str(k): n for (k, _), n in zip(cells, line_names)}
    out = []
    for title_values, g in _groups(df, facet):
        lines = tuple(Line(by_key[str(k)], c) for k, c in _groups(g, keys))
        out.append(Panel(name_of(facet, title_values), lines, unnamed))
    return out


def _widest(df: pd.DataFrame, facet: list[Key], keys: list[Key]) -> int:
    """The most lines one panel holds when df is split by the facet keys (counted on the keys'
    distinct values: splitting the frame into every group took a minute for a 24-cell study)."""
    inner = [k for k in keys if k not in facet]
    if not facet or not inner:
        return _group_count(df, inner)
    distinct = df[columns(facet + inner)].astype(str).drop_duplicates()
    return int(distinct.groupby(columns(facet)).size().max())


def _group_count(df: pd.DataFrame, keys: list[Key]) -> int:
    """How many groups `keys` split df into (missing values a group of their own, as _groups)."""
    return len(df[columns(keys)].astype(str).drop_duplicates()) if keys else 1


def _groups(df: pd.DataFrame, keys: list[Key]) -> list[tuple[tuple, pd.DataFrame]]:
    if not keys:
        return [((), df)]
    return [
        (k if isinstance(k, tuple) else (k,), g)
        for k, g in df.groupby(columns(keys), sort=True, dropna=False)
    ]


def spread(df: pd.DataFrame, x: str, least: int = 2) -> pd.DataFrame:
    """The rows of the cells run at `least` or more values of x (a line needs two points)."""
    keys = columns(cell_keys(df, x))
    if df.empty:
        return df
    counts = df.groupby(keys, dropna=False)[x].transform("nunique") if keys else df[x].nunique()
    return df[counts >= least] if keys else (df if counts >= least else df.iloc[:0])


def per_x(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per x value of one cell: the median of y over its ok repeats (cells.Cell's aggregation),
    with the lowest and highest repeat (what an error bar of this cell shows)."""
    from .cells import cells

    found = [c for c in cells(rows, y, [Key(x, x)]) if c.values]
    return pd.DataFrame(
        {
            "median": [c.median for c in found],
            "low": [min(c.values) for c in found],
            "high": [max(c.values) for c in found],
            "n": [len(c.values) for c in found],
        },
        index=pd.Index([c.key[0] for c in found], name=x),
    ).sort_index()
