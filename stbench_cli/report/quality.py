"""The report's per-epoch and per-second figures: time to quality (epochs.csv) and system
timelines (system.csv). Both join their rows to the runs by (study, run_id): the same cell
run on two machines has the same run_id, and its rows must not meet."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .figures import Picture, caption
from .series import cell_keys, common, names, panels, spread
from .style import from_zero, grid, legend_below, look, png

SYSTEM_METRICS = (("proc_cpu_pct", "process CPU (%)"), ("proc_rss_mb", "process RSS (MiB)"),
                  ("gpu_util_pct", "GPU utilisation (%)"), ("gpu_mem_mb", "GPU memory used (MiB)"),
                  ("gpu_power_w", "GPU power (W)"))
CELLS_PER_FIGURE = 6


def joined(w: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """epochs.csv or system.csv rows with their run's keys (label, cell keys, repeat)."""
    if rows.empty:
        return rows
    w = w.rename(columns={"val_metric": "val_metric_name"})  # the metric's name; epochs.csv has its values
    keep = ["study", "run_id", *[c for c in w.columns if c not in rows.columns]]
    return rows.merge(w[keep], on=["study", "run_id"], how="inner")


def _curve(runs: pd.DataFrame) -> pd.DataFrame:
    """One cell's validation curve: per epoch the median over repeats of the metric and of
    the wall time elapsed since training began."""
    runs = runs.sort_values(["study", "run_id", "epoch"]).copy()
    runs["elapsed_s"] = runs.groupby(["study", "run_id"])["epoch_s"].cumsum()
    return runs.groupby("epoch").agg(metric=("val_metric", "median"), elapsed=("elapsed_s", "median"),
                                     naive=("naive_baseline", "median"))


def _longest(ep: pd.DataFrame) -> pd.DataFrame:
    """Per setting, only the cell run for the most epochs: a shorter run of the same seed and
    settings is a prefix of its curve, so one line per setting says it all."""
    keys = [k for k in cell_keys(ep) if k != "epochs"]
    if not keys:
        return ep[ep["epochs"] == ep["epochs"].max()]
    top = ep.groupby(keys, dropna=False)["epochs"].transform("max")
    return ep[ep["epochs"] == top]


def time_to_quality(w: pd.DataFrame, epochs: pd.DataFrame, workload: str) -> Picture | None:
    """The validation metric against wall time and against epochs for the cells that ran two
    or more epochs; the naive baseline dashed
    (grey where the panel's cells share one, else in the line's colour), the first epoch that
    beats it starred."""
    ep = joined(w[w["status"] == "ok"], epochs).dropna(subset=["val_metric"])
    ep = spread(_longest(ep), "epoch") if not ep.empty else ep
    if ep.empty:
        return None
    shown = panels(ep, "epoch")
    fig, axes = grid(2 * len(shown), per_row=2)
    colours: dict[str, int] = {}
    handles = {}
    for k, panel in enumerate(shown):
        pair = axes[2 * k: 2 * k + 2]
        curves = {ln.name: _curve(ln.rows) for ln in panel.lines}
        shared = {round(float(c["naive"].iloc[0]), 12) for c in curves.values() if c["naive"].notna().any()}
        for name, c in curves.items():
            i = colours.setdefault(name, len(colours))
            for ax, x in zip(pair, (c["elapsed"], c.index)):
                handles[name] = ax.plot(x, c["metric"], linewidth=1.5, markersize=4, **look(i))[0]
                _baseline(ax, x, c, look(i)["color"], "grey" if len(shared) == 1 else look(i)["color"])
        metric = str(panel.lines[0].rows["val_metric_name"].iloc[0])
        for ax, xlabel in zip(pair, ("wall time since training began (s)", "epoch")):
            ax.set(xlabel=xlabel, ylabel=f"{metric} (lower is better)", title=panel.title)
            _log_if_wide(ax, ep["val_metric"])
        pair[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    handles["naive baseline"] = Line2D([], [], color="grey", linestyle="--")
    handles["first epoch below the baseline"] = Line2D([], [], color="grey", marker="*", markersize=11, linestyle="")
    unnamed = shown[0].unnamed
    legend_below(fig, handles, f"unless named: {unnamed}" if unnamed else "")
    text = caption(f"{workload}: validation metric per epoch of the longest run of each setting (medians over "
                   "repeats)", "the dashed line is the naive baseline it must beat (persistence or the mean)",
                   f"all cells: {common(ep)}" if common(ep) else "")
    return Picture(f"{workload}-time-to-quality", "Time to quality", text, png(fig))


def _baseline(ax, x, c: pd.DataFrame, colour: str, line_colour: str) -> None:
    """The naive baseline as a dashed line, and a star on the first epoch below it."""
    naive = c["naive"].dropna()
    if naive.empty:
        return
    ax.axhline(float(naive.iloc[0]), color=line_colour, linestyle="--", linewidth=1, alpha=0.8)
    beats = np.flatnonzero((c["metric"] < naive.iloc[0]).to_numpy())
    if len(beats):
        j = beats[0]
        ax.plot(np.asarray(x)[j], c["metric"].iloc[j], marker="*", markersize=13, color=colour,
                markeredgecolor="black", linestyle="")


def _log_if_wide(ax, values: pd.Series) -> None:
    v = values[values > 0]
    if len(v) and v.max() / v.min() > 30:
        ax.set_yscale("log")


def system_timelines(w: pd.DataFrame, system: pd.DataFrame, workload: str) -> list[Picture]:
    """Per run, the sampled process CPU and RSS (and GPU utilisation, memory and power where
    a GPU was sampled) against time since the cell started; a few cells per figure."""
    sy = joined(w, system)
    if sy.empty:
        return []
    metrics = [(col, label) for col, label in SYSTEM_METRICS if col in sy.columns and sy[col].notna().any()]
    keys = cell_keys(sy)
    cells = [g for _, g in sy.groupby(keys, sort=True, dropna=False)] if keys else [sy]
    cell_names, unnamed = names(pd.DataFrame([g.iloc[0] for g in cells]), keys)
    out = []
    for start in range(0, len(cells), CELLS_PER_FIGURE):
        chunk = list(zip(cell_names, cells))[start: start + CELLS_PER_FIGURE]
        out.append(_timeline(chunk, metrics, workload, start // CELLS_PER_FIGURE + 1,
                             -(-len(cells) // CELLS_PER_FIGURE), unnamed, common(sy)))
    return out


def _timeline(chunk, metrics, workload: str, part: int, parts: int, unnamed: str, shared: str) -> Picture:
    fig, axes = grid(len(metrics), per_row=2, size=(5.2, 3.0))
    handles = {}
    for i, (name, rows) in enumerate(chunk):
        for r, (_, run) in enumerate(rows.groupby(["study", "run_id"], sort=True)):
            run = run.sort_values("t_s")
            for ax, (col, _) in zip(axes, metrics):
                line = ax.plot(run["t_s"], run[col], color=look(i)["color"], linewidth=1.2, alpha=1.0 if r == 0 else 0.5)
                handles.setdefault(name, line[0])
    for ax, (_, label) in zip(axes, metrics):
        ax.set(xlabel="time since the cell started (s)", ylabel=label)
        from_zero(ax)
    legend_below(fig, handles, f"unless named: {unnamed}" if unnamed else "")
    suffix = f" ({part} of {parts})" if parts > 1 else ""
    text = caption(f"{workload}: system samples of each run, one line per run (repeats of a cell share its colour); "
                   "process CPU is psutil's percent of one core (200% = two cores busy), RSS of the whole process tree",
                   f"all cells: {shared}" if shared else "", f"unless named: {unnamed}" if unnamed else "")
    return Picture(f"{workload}-system-{part}", f"System timelines{suffix}", text, png(fig))
