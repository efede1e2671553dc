"""A study's figures of time and memory: time vs epochs per cell, where the time went,
data-parallel scaling, and where the memory went. Each takes a study's frame (report.model)
and returns a Picture (PNG bytes), or None where the rows have nothing to show. Lines are cells
(report.plotting); only repeats of one cell are ever aggregated."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ..store.rows import PHASE_COLUMNS
from .labels import show
from .model import axes, columns, name_of
from .plotting import (
    PHASE_COLOURS,
    Picture,
    caption,
    cell_keys,
    differ,
    from_zero,
    grid,
    legend_below,
    look,
    panels,
    per_x,
    png,
    short_names,
    spread,
)
from .tables import MEMORY, memory_cells

REPEAT_NOTE = "points are medians over repeats; bars span the lowest and highest repeat"
MEMORY_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")  # Okabe-Ito: any colour vision


def errorbar(ax, m: pd.DataFrame, name: str, i: int) -> Line2D:
    yerr = np.vstack([m["median"] - m["low"], m["high"] - m["median"]])
    bars = ax.errorbar(
        m.index,
        m["median"],
        yerr=yerr,
        capsize=3,
        label=name,
        linewidth=1.5,
        markersize=5,
        **look(i),
    )
    return bars.lines[0]


def time_vs_epochs(w: pd.DataFrame, workload: str) -> Picture | None:
    """Wall time against epochs, one line per cell run at two or more epoch counts."""
    ok = spread(w[w["status"] == "ok"], "epochs")
    if ok.empty:
        return None
    shown = panels(ok, "epochs")
    fig, axes = grid(len(shown))
    colours: dict[str, int] = {}
    handles = {}
    for ax, panel in zip(axes, shown):
        for ln in panel.lines:
            i = colours.setdefault(ln.name, len(colours))
            handles[ln.name] = errorbar(ax, per_x(ln.rows, "epochs", "wall_s"), ln.name, i)
        ax.set(xlabel="epochs", ylabel="wall time (s)", title=panel.title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        from_zero(ax)
    legend_below(fig, handles, f"unless named: {shown[0].unnamed}" if shown[0].unnamed else "")
    text = caption(
        f"{workload}: wall time of each cell against its epoch count",
        REPEAT_NOTE,
        differ(ok, "epochs"),
        *(f"unless named: {u}" for u in dict.fromkeys(p.unnamed for p in shown if p.unnamed)),
    )
    return Picture(f"{workload}-time-vs-epochs", "Time vs epochs", text, png(fig))


def phase_bars(w: pd.DataFrame, workload: str) -> Picture | None:
    """Stacked bars per cell: each phase's share of train + eval time, total seconds beside."""
    ok = w[w["status"] == "ok"].dropna(subset=list(PHASE_COLUMNS))
    if ok.empty:
        return None
    keys = cell_keys(ok)
    cells = ok.groupby(columns(keys), sort=True, dropna=False) if keys else [((), ok)]
    med = pd.DataFrame(
        [{**g.iloc[0].to_dict(), **g[list(PHASE_COLUMNS)].median().to_dict()} for _, g in cells]
    )
    total = med[list(PHASE_COLUMNS)].sum(axis=1).to_numpy()
    labels, unnamed = short_names(med, keys)
    fig, (ax,) = grid(1, size=(10.5, 0.32 * len(med) + 1.6))
    left = np.zeros(len(med))
    y = np.arange(len(med))[::-1]
    handles = {}
    for col in PHASE_COLUMNS:
        share = 100 * med[col].to_numpy() / total
        handles[col[:-2]] = ax.barh(y, share, left=left, color=PHASE_COLOURS[col[:-2]], height=0.7)
        left += share
    for yi, t in zip(y, total):
        ax.text(101, yi, f"{t:,.3g} s", va="center", fontsize=7)
    ax.set_yticks(y, [textwrap.fill(label, 60) for label in labels], fontsize=7)
    ax.set(xlim=(0, 112), xlabel="share of train + eval time (%)")
    if unnamed:
        fig.suptitle(textwrap.fill(f"unless named: {unnamed}", 140), fontsize=8)
    legend_below(fig, handles)
    text = caption(
        f"{workload}: where each cell's time went (medians over repeats); the number "
        "is train + eval seconds",
        differ(ok),
        f"unless named: {unnamed}" if unnamed else "",
    )
    return Picture(f"{workload}-phases", "Where the time went", text, png(fig))


def _node_boundaries(ax, rows: pd.DataFrame) -> bool:
    """Dotted lines past the largest world that k nodes ran, where a larger world needed more
    nodes: the worlds beyond it span another machine (the sync cost usually jumps there)."""
    if "nodes" not in rows.columns or not (rows["nodes"].fillna(1) > 1).any():
        return False
    nodes, drawn = rows["nodes"].fillna(1), False
    for k in sorted(nodes.unique())[:-1]:
        widest = rows[nodes <= k]["world_size"].max()
        if (rows[nodes > k]["world_size"] > widest).any():
            ax.axvline(widest + 0.5, color="grey", linestyle=":", linewidth=1)
            drawn = True
    return drawn


def _smallest_world_sps(ln, panel) -> float | None:
    """Median samples/s of the smallest world of this cell's settings: on the line itself, or on
    the line that differs from it only in nodes (a 2-node line starts above world size 1)."""
    rows = pd.concat([other.rows for other in panel.lines])
    same = [
        k.column
        for k in cell_keys(rows)
        if k.column not in ("world_size", "nodes", "nproc_per_node")
    ]
    mine = ln.rows.iloc[0]
    wanted = [show(mine[k]) for k in same]  # shown values: a missing parameter ("-") equals itself
    found = [[show(v) for v in r] == wanted for r in rows[same].itertuples(index=False)]
    match = rows[found] if same else rows
    smallest = match[match["world_size"] == match["world_size"].min()]["samples_per_s"]
    return float(smallest.median()) if len(smallest) else None


def _scaling_panel(axes, panel, colours: dict[str, int], handles: dict) -> bool:
    """One panel's three plots; True where it drew node boundaries."""
    a_speed, a_eff, a_sync = axes
    rows = pd.concat([ln.rows for ln in panel.lines])
    smallest = int(rows["world_size"].min())
    for ln in panel.lines:
        i = colours.setdefault(ln.name, len(colours))
        sps, base = per_x(ln.rows, "world_size", "samples_per_s"), _smallest_world_sps(ln, panel)
        if base:
            speed = sps["median"] / base
            a_speed.plot(speed.index, speed.values, **look(i))
            a_eff.plot(speed.index, 100 * speed.values * smallest / speed.index, **look(i))
        handles[ln.name] = errorbar(a_sync, per_x(ln.rows, "world_size", "sync_ms"), ln.name, i)
    top = int(rows["world_size"].max())
    a_speed.plot([smallest, top], [1, top / smallest], "k--", linewidth=1)
    a_eff.axhline(100, color="black", linestyle="--", linewidth=1)
    nodes = False
    against = f"speedup vs {smallest} process{'es' if smallest > 1 else ''}"
    for ax, ylabel in (
        (a_speed, against),
        (a_eff, "scaling efficiency (%)"),
        (a_sync, "sync waited (ms/step)"),
    ):
        ax.set(xlabel="processes (world size)", ylabel=ylabel, title=panel.title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        from_zero(ax)
        nodes = _node_boundaries(ax, rows) or nodes
    return nodes


def scaling(w: pd.DataFrame, workload: str) -> Picture | None:
    """Speedup and efficiency against the smallest world (ideal dashed) and ms per gradient sync,
    against the world size; dotted lines where a world spans another node."""
    ddp = w[(w["strategy"] != "single") & (w["status"] == "ok")]  # every distributed strategy
    if ddp["world_size"].nunique() < 2:
        return None
    # a panel of one world size (a strategies study at nproc=2) has no scaling to show; the
    # rest are laid out again, so that names and captions speak of what is drawn
    kept = [pd.concat([ln.rows for ln in p.lines]) for p in panels(ddp, "world_size")]
    kept = [rows for rows in kept if rows["world_size"].nunique() > 1]
    if not kept:
        return None
    ddp = pd.concat(kept)
    shown = panels(ddp, "world_size")
    fig, axes = grid(3 * len(shown), per_row=3, size=(4.2, 3.4))
    colours: dict[str, int] = {}
    handles: dict = {}
    nodes = False
    for k, panel in enumerate(shown):
        nodes = _scaling_panel(axes[3 * k : 3 * k + 3], panel, colours, handles) or nodes
    handles["ideal"] = Line2D([], [], color="black", linestyle="--")
    if nodes:
        handles["larger worlds span another node"] = Line2D([], [], color="grey", linestyle=":")
    legend_below(fig, handles, f"unless named: {shown[0].unnamed}" if shown[0].unnamed else "")
    text = caption(
        f"{workload}: data-parallel scaling; speedup and efficiency from median "
        "samples/s against the smallest world of the same cell settings, ideal dashed",
        "sync: gradient communication a training step waited for, per step; " + REPEAT_NOTE,
        differ(ddp, "world_size"),
    )
    return Picture(f"{workload}-scaling", "Data-parallel scaling", text, png(fig))


def memory(w: pd.DataFrame, workload: str) -> Picture | None:
    """Stacked horizontal bars of the memory parts per cell, and each cell's wall time beside
    them on the same rows; None where no row counted memory."""
    keys, cells = memory_cells(w)
    if cells.empty:
        return None
    # a cell by what varies among the cells drawn (the rows that did not count memory left out)
    named = axes(cells, keys) or keys[:1]
    names = [
        "\n".join(textwrap.wrap(name_of(named, row), 40))
        for row in cells[columns(named)].itertuples(index=False)
    ]
    height = 1.6 + sum(0.2 + 0.18 * (n.count("\n") + 1) for n in names)  # room for wrapped names
    fig, (mem, time) = plt.subplots(
        1,
        2,
        figsize=(10, height),
        sharey=True,
        layout="constrained",
        gridspec_kw={"width_ratios": [3, 1.4]},
    )
    left = pd.Series(0.0, index=cells.index)
    for (col, label), colour in zip(MEMORY.items(), MEMORY_COLOURS):
        mem.barh(names, cells[col].fillna(0), left=left, label=label, color=colour)
        left += cells[col].fillna(0)
    mem.set(xlabel="MiB per rank (max over ranks)", title=f"{workload}: where the memory went")
    mem.invert_yaxis()  # the first cell on top
    time.barh(names, cells["wall_s"], color="#555555")
    time.set(xlabel="wall time (s)", title="time of the same cells")
    # below everything, in space the constrained layout keeps free for it
    fig.legend(
        *mem.get_legend_handles_labels(),
        loc="outside lower center",
        ncol=4,
        fontsize=8,
        frameon=False,
    )
    text = caption(
        "per rank, the maximum over ranks: parameters, gradients and optimizer state "
        "counted from the tensors the rank holds; activations: one step's peak above "
        "its start less its gradients",
        "medians over repeats",
        f"cells differ in {', '.join(k.name for k in named)}" if len(cells) > 1 else "",
    )
    return Picture(f"{workload}-memory", f"{workload}: where the memory went", text, png(fig))
