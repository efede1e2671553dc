"""The report's per-epoch and per-second figures: time to quality (epochs.csv) and system
timelines (system.csv). Both join their rows to the runs by (study, run_id): the same cell
run on two machines has the same run_id, and its rows must not meet."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from .model import columns
from .plotting import (
    Picture,
    caption,
    cell_keys,
    differ,
    from_zero,
    grid,
    legend_below,
    look,
    panels,
    png,
    short_names,
    spread,
)

SYSTEM_METRICS = (
    ("proc_cpu_pct", "process CPU (%)"),
    ("proc_rss_mb", "process RSS (MiB)"),
    ("gpu_util_pct", "GPU utilisation (%)"),
    ("gpu_mem_mb", "GPU memory used (MiB)"),
    ("gpu_power_w", "GPU power (W)"),
)
CELLS_PER_FIGURE = 6


def joined(w: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """epochs.csv or system.csv rows with their run's keys (label, cell keys, repeat)."""
    if rows.empty:
        return rows
    # the metric's name; epochs.csv has its values
    w = w.rename(columns={"val_metric": "val_metric_name"})
    keep = ["study", "run_id", *[c for c in w.columns if c not in rows.columns]]
    return rows.merge(w[keep], on=["study", "run_id"], how="inner")


def _evaluations(ep: pd.DataFrame) -> pd.DataFrame:
    """epochs.csv rows with their place in the run: `evaluation` (1, 2, ... in the run),
    `elapsed` (seconds since the first step, evaluation included) and `progress` (epochs
    done)."""
    ep = ep.sort_values(["study", "run_id", "epoch", "step"]).copy()
    ep["evaluation"] = ep.groupby(["study", "run_id"]).cumcount() + 1
    return ep.assign(elapsed=ep["elapsed_s"], progress=ep["epochs_done"])


def _curve(runs: pd.DataFrame) -> pd.DataFrame:
    """One cell's validation curve: per evaluation the median over repeats of the metric, of
    the time elapsed and of the epochs done (the evaluations every repeat made)."""
    cols = dict(
        metric=("val_metric", "median"),
        elapsed=("elapsed", "median"),
        progress=("progress", "median"),
        naive=("naive_baseline", "median"),
    )
    if "target" in runs:
        cols["target"] = ("target", "median")
    # only the evaluations every repeat reached: where a budget let one repeat evaluate more
    # often, a median of fewer runs would step back in time
    every = runs.groupby("evaluation")["run_id"].transform("nunique") == runs["run_id"].nunique()
    runs = runs[every]
    return runs.groupby("evaluation").agg(**cols)


def _longest(ep: pd.DataFrame) -> pd.DataFrame:
    """Per setting, only the cell run for the most epochs: a shorter run of the same seed and
    settings is a prefix of its curve, so one line per setting says it all."""
    keys = [k.column for k in cell_keys(ep) if k.column != "epochs"]
    if not keys:
        return ep[ep["epochs"] == ep["epochs"].max()]
    top = ep.groupby(keys, dropna=False)["epochs"].transform("max")
    return ep[ep["epochs"] == top]


def time_to_quality(w: pd.DataFrame, epochs: pd.DataFrame, workload: str) -> Picture | None:
    """The validation metric against wall time and against epochs for the cells evaluated two
    or more times; the naive baseline dashed and the target dotted (grey where the panel's
    cells share one, else in the line's colour), the first evaluation that reaches the target
    starred (without a target: the first that beats the baseline)."""
    if "val_metric" not in epochs.columns:  # no epochs.csv rows (a copied runs.csv alone)
        return None
    ep = joined(w[w["status"] == "ok"], epochs).dropna(subset=["val_metric"])
    ep = spread(_longest(_evaluations(ep)), "evaluation") if not ep.empty else ep
    if ep.empty:
        return None
    shown, scale = panels(ep, "evaluation"), y_scale(ep["val_metric"])
    fig, axes = grid(2 * len(shown), per_row=2)
    colours: dict[str, int] = {}
    handles = {}
    for k, panel in enumerate(shown):
        pair = axes[2 * k : 2 * k + 2]
        curves = {ln.name: _curve(ln.rows) for ln in panel.lines}
        shared = {
            c: len(
                {
                    round(float(v[c].iloc[0]), 12)
                    for v in curves.values()
                    if c in v and v[c].notna().any()
                }
            )
            for c in ("naive", "target")
        }
        for name, c in curves.items():
            i = colours.setdefault(name, len(colours))
            colour = look(i)["color"]
            for ax, x in zip(pair, (c["elapsed"], c["progress"])):
                handles[name] = ax.plot(x, c["metric"], linewidth=1.5, markersize=4, **look(i))[0]
                levels = {col: "grey" if n == 1 else colour for col, n in shared.items()}
                _levels(ax, x, c, colour, levels)
        metric = str(panel.lines[0].rows["val_metric_name"].iloc[0])
        for ax, xlabel in zip(pair, ("wall time since training began (s)", "epochs")):
            ax.set(xlabel=xlabel, ylabel=f"{metric} (lower is better)", title=panel.title)
            ax.set_yscale(scale)
    handles["naive baseline"] = Line2D([], [], color="grey", linestyle="--")
    targets = "target" in ep and ep["target"].notna().any()
    if targets:
        handles["target"] = Line2D([], [], color="grey", linestyle=":")
    first = "first evaluation at the target" if targets else "first evaluation below the baseline"
    handles[first] = Line2D([], [], color="grey", marker="*", markersize=11, linestyle="")
    unnamed = shown[0].unnamed
    legend_below(fig, handles, f"unless named: {unnamed}" if unnamed else "")
    text = _ttq_caption(workload, scale, targets, ep)
    return Picture(f"{workload}-time-to-quality", "Time to quality", text, png(fig))


def _ttq_caption(workload: str, scale: str, targets: bool, ep: pd.DataFrame) -> str:
    log = ", on a logarithmic axis" if scale == "log" else ""
    return caption(
        f"{workload}: validation metric at each evaluation of the longest run of each "
        f"setting (medians over repeats){log}",
        "the dashed line is the naive baseline it must beat (persistence or the mean)",
        "the dotted line is the target; wall time counts evaluation, as MLPerf's clock does"
        if targets
        else "",
        differ(ep, "evaluation"),
    )


def _levels(ax, x, c: pd.DataFrame, colour: str, line_colours: dict[str, str]) -> None:
    """The naive baseline dashed, the target dotted, and a star on the first evaluation at the
    target (without a target: the first below the baseline)."""
    mark = None
    for col, style in (("naive", "--"), ("target", ":")):
        level = c[col].dropna() if col in c else pd.Series(dtype=float)
        if level.empty:
            continue
        ax.axhline(
            float(level.iloc[0]), color=line_colours[col], linestyle=style, linewidth=1, alpha=0.8
        )
        below = (c["metric"] <= level.iloc[0]) if col == "target" else (c["metric"] < level.iloc[0])
        mark = np.flatnonzero(below.to_numpy())
    if mark is not None and len(mark):
        j = mark[0]
        ax.plot(
            np.asarray(x)[j],
            c["metric"].iloc[j],
            marker="*",
            markersize=13,
            color=colour,
            markeredgecolor="black",
            linestyle="",
        )


def y_scale(values: pd.Series) -> str:
    """A validation metric's axis: logarithmic wherever every value is positive, so that a curve
    that falls by orders of magnitude is not laid flat on zero, and the late gains near the
    target stay visible."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    return "log" if len(v) and (v > 0).all() else "linear"


def system_timelines(w: pd.DataFrame, system: pd.DataFrame, workload: str) -> list[Picture]:
    """Per run, the sampled process CPU and RSS (and GPU utilisation, memory and power where
    a GPU was sampled) against time since the cell started; a few cells per figure."""
    sy = joined(w, system)
    if sy.empty:
        return []
    metrics = [
        (col, label) for col, label in SYSTEM_METRICS if col in sy.columns and sy[col].notna().any()
    ]
    keys = cell_keys(sy)
    cells = [g for _, g in sy.groupby(columns(keys), sort=True, dropna=False)] if keys else [sy]
    cell_names, unnamed = short_names(pd.DataFrame([g.iloc[0] for g in cells]), keys)
    out = []
    for start in range(0, len(cells), CELLS_PER_FIGURE):
        chunk = list(zip(cell_names, cells))[start : start + CELLS_PER_FIGURE]
        out.append(
            _timeline(
                chunk,
                metrics,
                workload,
                start // CELLS_PER_FIGURE + 1,
                -(-len(cells) // CELLS_PER_FIGURE),
                unnamed,
                differ(sy),
            )
        )
    return out


def _timeline(
    chunk, metrics, workload: str, part: int, parts: int, unnamed: str, shared: str
) -> Picture:
    fig, axes = grid(len(metrics), per_row=2, size=(5.2, 3.0))
    handles = {}
    for i, (name, rows) in enumerate(chunk):
        for r, (_, run) in enumerate(rows.groupby(["study", "run_id"], sort=True)):
            run = run.sort_values("t_s")
            for ax, (col, _) in zip(axes, metrics):
                line = ax.plot(
                    run["t_s"],
                    run[col],
                    color=look(i)["color"],
                    linewidth=1.2,
                    alpha=1.0 if r == 0 else 0.5,
                )
                handles.setdefault(name, line[0])
    for ax, (_, label) in zip(axes, metrics):
        ax.set(xlabel="time since the cell started (s)", ylabel=label)
        from_zero(ax)
    legend_below(fig, handles, f"unless named: {unnamed}" if unnamed else "")
    suffix = f" ({part} of {parts})" if parts > 1 else ""
    text = caption(
        f"{workload}: system samples of each run, one line per run (repeats of a cell "
        "share its colour); process CPU is psutil's percent of one core (200% = two "
        "cores busy), RSS of the whole process tree",
        shared,
        f"unless named: {unnamed}" if unnamed else "",
    )
    return Picture(f"{workload}-system-{part}", f"System timelines{suffix}", text, png(fig))
