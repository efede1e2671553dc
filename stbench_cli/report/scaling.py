"""How a run scales (pure): with its world, and with its problem's size.

The data-parallel scaling study, as a thesis on multi-node DDP reports it: per world
size and node count, the epoch time, samples/s, speedup and efficiency against the smallest
world measured, the share of training time spent waiting for gradient synchronisation, what one
synchronisation costs, how many there are per epoch, and where a new node joins (the sync cost
usually jumps there: traffic leaves the machine). Its finding states the speedup, efficiency
and sync share of the largest world, and the world where efficiency first drops below 50%.

A size study (a parameter that sets the problem's size varies: model.size_axis): how peak memory
and step time grow with it, as fitted exponents, and the memory measured against the workload's
prediction."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..comparison import median
from .cells import Cell, differs, fit_line, interval, not_ok, ratio, significant
from .cost import peak_memory
from .labels import format_number, show, size_number
from .model import HARDWARE, Key, axes, columns, keys_of, name_of, size_axis
from .tables import SPREAD, cells_table, heads
from .ttt import ttt_speedup

WORLD = ("world_size", "nodes")
SPS = "samples/s"
LINE = (
    "nodes",
    "nproc",
    "world",
    "epoch_s",
    "samples_per_s",
    "speedup",
    "ttt_speedup",
    "efficiency",
    "sync_share",
    "ms_per_sync",
    "syncs_per_epoch",
    "node_boundary",
)
# the finding's table: the full table's columns that answer it
SHOWN = (
    "nodes",
    "nproc",
    "world",
    "samples_per_s",
    "speedup",
    "efficiency",
    "sync_share",
    "ttt_speedup",
    "node_boundary",
)


def _fmt(x: float, text: str) -> str:
    return text if math.isfinite(x) else "-"


def _world_line(gn: pd.DataFrame, base: pd.DataFrame, base_world: int, new_node: bool) -> dict:
    sps, one = gn["samples_per_s"].tolist(), base["samples_per_s"].tolist()
    world, nodes = int(gn["world_size"].iloc[0]), int(gn["nodes"].iloc[0])
    speed = float(np.median(sps) / np.median(one)) if one and sps else math.nan
    note = "" if gn is base or significant(one, sps) else " (not significant)"
    share = median(gn["sync_s"] / gn["train_s"])
    per_sync = 1000 * gn["sync_s"] / gn["sync_count"].where(gn["sync_count"] > 0)
    return {
        "nodes": nodes,
        "nproc": int(gn["nproc_per_node"].iloc[0]),
        "world": world,
        "epoch_s": format_number(median(gn["epoch_s"])),
        "samples_per_s": format_number(float(np.median(sps))),
        "speedup": _fmt(speed, f"{speed:.2f}x{note}"),
        # the thesis' point: a world's throughput speedup is not its convergence speedup
        "ttt_speedup": ttt_speedup(gn, base),
        "efficiency": _fmt(speed, f"{100 * speed * base_world / world:.0f}%"),
        "sync_share": _fmt(share, f"{100 * share:.1f}%"),
        "ms_per_sync": format_number(median(per_sync)),
        "syncs_per_epoch": format_number(median(gn["sync_count"] / gn["epochs"])),
        "node_boundary": f"<- node {nodes} joins" if new_node else "",
    }


def _group_lines(g: pd.DataFrame) -> list[dict]:
    """One line per (world, nodes), smallest world first; speedups against the smallest."""
    parts = list(g.groupby(list(WORLD), sort=True))
    (base_world, base_nodes), base = parts[0]
    lines, nodes_seen = [], int(base_nodes)
    for (_, nodes), gn in parts:
        lines.append(_world_line(gn, base, int(base_world), int(nodes) > nodes_seen))
        nodes_seen = max(nodes_seen, int(nodes))
    return lines


def _multi(s: pd.DataFrame) -> pd.DataFrame:
    """The runs of every distributed strategy (every strategy but `single`) that ended ok."""
    return s[(s["strategy"] != "single") & (s["status"] == "ok")]


def table(s: pd.DataFrame) -> pd.DataFrame | None:
    """The scaling table of a study's multi-process runs, where they span two worlds or more."""
    multi = _multi(s)
    if len(multi[list(WORLD)].drop_duplicates()) < 2:
        return None
    keys = [k for k in keys_of(s) if k.column not in (*WORLD, "nproc_per_node")]
    shown = [k for k in keys if k == HARDWARE or k in axes(multi, keys)]
    names = dict(zip(shown, heads(shown, LINE)))
    lines = []
    for key, g in multi.groupby(columns(keys), sort=True, dropna=False):
        named = {names[k]: show(v) for k, v in zip(keys, key) if k in shown}  # "-": none
        lines += [{**named, **line} for line in _group_lines(g)]
    out = pd.DataFrame(lines)
    if not out["node_boundary"].any():  # every world on one node: nothing to mark
        out = out.drop(columns="node_boundary")
    if (out["ttt_speedup"] == "-").all():  # no run had a target, or none reached it
        out = out.drop(columns="ttt_speedup")
    out.attrs["keys"] = list(out.columns[: list(out.columns).index("world") + 1])
    return out


def view(s: pd.DataFrame) -> tuple[str, pd.DataFrame] | None:
    """The finding's table: the full table's speedup, efficiency and sync columns."""
    full = table(s)
    if full is None:
        return None
    lead = list(full.columns[: list(full.columns).index("nodes")])
    layout = ["nodes", "nproc", "world"]
    if (full["nproc"] == full["world"]).all():  # every world on one node: nproc says it again
        layout.remove("nproc")
    rest = [c for c in SHOWN if c in full.columns and c not in ("nodes", "nproc", "world")]
    kept = full[lead + layout + rest].rename(columns={"samples_per_s": SPS, "sync_share": "sync"})
    kept.attrs["keys"] = lead + layout
    return (
        "data-parallel scaling against the smallest world: speedup, efficiency, and sync (the "
        "share of training time spent waiting for gradient synchronisation)",
        kept,
    )


def _world_cells(g: pd.DataFrame) -> list[tuple[int, int, Cell, float]]:
    """(world, nodes, samples/s cell, median sync share of training time), smallest first."""
    out = []
    for (world, nodes), gn in g.groupby(list(WORLD), sort=True):
        share = (gn["sync_s"] / gn["train_s"]).replace([np.inf, -np.inf], np.nan).dropna()
        sps = Cell(values=tuple(gn["samples_per_s"].dropna().astype(float)))
        out.append((int(world), int(nodes), sps, float(share.median()) if len(share) else math.nan))
    return [w for w in out if w[2].values]


def _where(world: int, nodes: int) -> str:
    where = f" on {nodes} nodes" if nodes > 1 else ""
    return f"{world} process{'es' if world > 1 else ''}{where}"


def finding(s: pd.DataFrame) -> str:
    """Speedup, efficiency and sync share at the largest world against the smallest, and the
    world where efficiency first drops below 50%; with other settings, the best of them."""
    multi = _multi(s)
    others = [k for k in axes(s[s["strategy"] != "single"]) if k.column not in WORLD]
    grouped = multi.groupby(columns(others), sort=False) if others else [((), multi)]
    groups = [(key if isinstance(key, tuple) else (key,), _world_cells(g)) for key, g in grouped]
    groups = [(k, w) for k, w in groups if len(w) >= 2]
    if not groups:
        return "Fewer than two world sizes finished: no scaling to state."
    best, worlds = max(groups, key=lambda g: ratio(g[1][0][2], g[1][-1][2]))
    (w0, _, base, _), (world, nodes, top, share) = worlds[0], worlds[-1]
    speed = ratio(base, top)
    first = (
        f"At {_where(world, nodes)}: {speed:.2f}x the samples/s of {_where(w0, 1)} "
        f"({_standing(base, top)}), efficiency {100 * speed * w0 / world:.0f}%, "
        f"gradient sync {100 * share:.1f}% of training time"
    )
    if len(groups) > 1:
        first += f" (best of {len(groups)} settings: {name_of(others, best)})"
    low = next(((w, n) for w, n, c, _ in worlds[1:] if 100 * ratio(base, c) * w0 / w < 50), None)
    second = (
        f"Efficiency first drops below 50% at {_where(*low)}."
        if low
        else f"Efficiency stays at 50% or more up to {_where(world, nodes)}."
    )
    return f"{first}. {second}"


def _standing(base: Cell, top: Cell) -> str:
    """Whether a speedup is beyond doubt, with the numbers: 'no significant difference: 9 ± 1
    vs 10 ± 2 samples/s', '95% intervals apart: ...', 'one run per cell, no interval: ...'."""
    shown = f"{top.amount()} vs {base.amount(SPS)}"
    if len(base.values) < 2 or len(top.values) < 2:
        return f"one run per cell, no interval: {shown}"
    standing = "95% intervals apart" if differs(base, top) else "no significant difference"
    return f"{standing}: {shown}"


# How memory and step time grow with the problem's size (a size parameter varies).


def _exponent(g: pd.DataFrame, key: Key, y: pd.Series) -> tuple[float, tuple[float, float]] | None:
    """The fitted exponent b of y ~ size^b over the runs (log-log least squares), with its
    interval."""
    x = np.log(g[key.column].map(size_number).astype(float))
    fit = fit_line(x, np.log(y.where(y > 0).astype(float)))
    return (fit.slope, fit.slope_ci) if fit else None


def _sized(s: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The ok runs with their memory (`mem_mb`) and step time (`step_ms`), and the memory's name."""
    mem, measure = peak_memory(s)
    step_ms = 1000 * s["global_batch_size"].astype(float) / s["samples_per_s"]
    return s.assign(mem_mb=mem, step_ms=step_ms), measure


def size(s: pd.DataFrame) -> str:
    """How peak memory and step time grow with the problem: fitted exponents per setting, and the
    measured memory against the workload's prediction where it made one."""
    key = size_axis(s)
    rows, measure = _sized(s[s["status"] == "ok"])
    others = [k for k in axes(s) if k not in (HARDWARE, key)]
    groups = list(rows.groupby(columns(others), sort=False)) if others else [((), rows)]
    labels = sorted(dict.fromkeys(s[key.column].dropna()), key=size_number)
    fits = []
    for k, g in groups:
        found = (_exponent(g, key, g["mem_mb"]), _exponent(g, key, g["step_ms"]))
        named = name_of(others, k if isinstance(k, tuple) else (k,)) if others else ""
        fits.append((named, *found))
    times = size_number(labels[-1]) / size_number(labels[0])
    growth = (
        f"From {key.name}={labels[0]} to {labels[-1]} ({times:.1f}x the size), {measure} "
        f"grows as {_powers(fits, 1)} and step time as {_powers(fits, 2)}"
    )
    return growth + _predicted(rows) + _unfinished_note(s, [key, *others])


def _powers(fits: list, i: int) -> str:
    """'size^0.98 (95% CI 0.90–1.06)' for one setting; 'size^0.60 (dense), ^0.34 (sparse)' for
    several; fits are (setting, memory exponent, step-time exponent), an exponent None where one
    size finished."""
    shown = [(f[0], f[i]) for f in fits if f[i] is not None]
    if not shown:
        return "- (one size finished)"
    if len(shown) == 1 and not shown[0][0]:
        slope, (lo, hi) = shown[0][1]
        ci = interval(lo, hi, fmt=lambda x: f"{x:.2f}")
        return f"size^{slope:.2f}" + (f" ({ci})" if ci else "")
    return ", ".join(
        f"{'size' if j == 0 else ''}^{e[0]:.2f} ({label})" for j, (label, e) in enumerate(shown)
    )


def _predicted(rows: pd.DataFrame) -> str:
    """'; measured 0.9–1.2x the predicted memory' where the workload predicted it."""
    r = (rows["mem_mb"] / rows["predicted_mb"]).replace([np.inf, -np.inf], np.nan).dropna()
    if r.empty:
        return ""
    lo, hi = float(r.min()), float(r.max())
    if round(lo, 2) == round(hi, 2):
        return f"; measured {lo:.2f}x the predicted memory"
    return f"; measured {lo:.2f}–{hi:.2f}x the predicted memory"


def _unfinished_note(s: pd.DataFrame, keys: list[Key]) -> str:
    gone = not_ok(s, keys)
    return "." + (f" Did not finish: {'; '.join(gone)}." if gone else "")


def size_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    key = size_axis(s)
    rows, measure = _sized(s)
    figures = [
        ("mem_mb", f"{measure} MiB"),
        ("predicted_mb", "predicted MiB"),
        ("step_ms", "step ms"),
    ]
    if s["predicted_mb"].isna().all():
        figures.pop(1)
    keys = [k for k in axes(s) if k not in (key, HARDWARE)] + [key]
    return f"memory and step time by problem size ({SPREAD})", cells_table(rows, keys, figures)
