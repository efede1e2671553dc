"""Findings of the studies that ask what a setting costs: memory against throughput (strategies,
checkpointing, any other setting), how memory and step time grow with the problem, the fixed and
per-epoch cost of a run, and a study of one cell (pure: a study's rows in, one or two sentences
and the table behind them out)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .cells import cells, contrast, fit_line, interval, not_ok, one_run
from .labels import format_number, size_of
from .model import HARDWARE, PARAM, Key, axes, columns, name_of
from .tables import SPREAD, cells_table, pivot, pivot_title

SPS = "samples/s"
SIZE_PARAMS = ("grid", "size", "n_samples", "n_nodes")  # parameters that set the problem's size
PARTS = ("param_mb", "grad_mb", "optim_state_mb", "activation_peak_mb")


def peak_memory(s: pd.DataFrame) -> tuple[pd.Series, str]:
    """The process's peak memory and its name: the GPU's peak where one was measured, else RSS."""
    if s["peak_gpu_mb"].notna().any():
        return s["peak_gpu_mb"], "peak GPU memory"
    return s["peak_rss_mb"], "peak RSS"


def rank_memory(s: pd.DataFrame) -> tuple[pd.Series, str]:
    """Memory per rank as a strategy changes it: the GPU's peak, else the parameters, gradients,
    optimizer state and activation peak a rank holds (counted where the rows have them: a CPU
    process's RSS hides them under the data and the runtime), else the peak RSS."""
    if not s["peak_gpu_mb"].notna().any() and s["param_mb"].notna().any():
        return s[list(PARTS)].sum(axis=1, min_count=1), "model state + activations"
    return peak_memory(s)


def _others(s: pd.DataFrame, *left_out: str) -> list[Key]:
    return [k for k in axes(s) if k != HARDWARE and k.name not in left_out]


def tradeoff(s: pd.DataFrame) -> str:
    """The cell that holds the least memory per rank against the fastest (or, where that is the
    fastest too, against the one that holds the most); where memory hardly differs, the fastest
    cell against the slowest."""
    keys = _others(s)
    mem, measure = rank_memory(s)
    speed = {c.key: c for c in cells(s, "samples_per_s", keys)}
    memory = [c for c in cells(s.assign(mem_mb=mem), "mem_mb", keys) if c.key in speed]
    if len(speed) < 2:
        return "Fewer than two cells finished: nothing to compare."
    fastest = max(speed.values(), key=lambda c: c.median)
    if len(memory) < 2 or not max(c.median for c in memory) > 1.1 * min(c.median for c in memory):
        slowest = min(speed.values(), key=lambda c: c.median)
        same = f"; {measure} within 10% across cells" if memory else ""
        said = contrast(slowest, fastest, amounts=False, note=False)
        pair = (
            f"the fastest, {fastest.name} ({fastest.amount(SPS)}), and the slowest, "
            f"{slowest.name} ({slowest.amount(SPS)})"
        )
        lead = (
            f"No significant difference in samples/s between {pair}"
            if said.startswith("no significant")
            else f"Fastest: {fastest.name} ({fastest.amount(SPS)}), {said} than the slowest, "
            f"{slowest.name} ({slowest.amount(SPS)})"
        )
        return f"{lead}{same}{_once(fastest, slowest)}." + _data_note(s, keys)
    least = min(memory, key=lambda c: c.median)
    ref = (
        next(c for c in memory if c.key == fastest.key)
        if least.key != fastest.key
        else max(memory, key=lambda c: c.median)
    )
    than = f"the fastest cell, {ref.name}" if ref.key == fastest.key else ref.name
    held = contrast(
        ref, least, higher_is_better=False, words=("less", "more"), amounts=False, note=False
    )
    cost = contrast(speed[ref.key], speed[least.key], amounts=False, note=False)
    return (
        f"{least.name} holds the least memory per rank, {least.amount('MiB')} {measure}: "
        f"{held} than {than} ({ref.amount('MiB')}); in samples/s it is {cost} "
        f"({speed[least.key].amount()} vs {speed[ref.key].amount(SPS)})"
        f"{_once(least, ref)}."
    ) + _data_note(s, keys)


def _once(*shown) -> str:
    return "; one run per cell: no interval" if one_run(*shown) else ""


def _data_note(s: pd.DataFrame, keys: list[Key]) -> str:
    """Where the data held in memory differs by more than 10% between cells, the extremes."""
    data = cells(s, "data_mb", keys)
    if len(data) < 2:
        return ""
    lo, hi = min(data, key=lambda c: c.median), max(data, key=lambda c: c.median)
    if not hi.median > 1.1 * lo.median:
        return ""
    return (
        f" Data in memory: {lo.amount('MiB')} ({lo.name}) against {hi.amount('MiB')} ({hi.name})."
    )


def tradeoff_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    mem, measure = rank_memory(s)
    figures = [("mem_mb", f"{measure} MiB"), ("samples_per_s", SPS)]
    if s["data_mb"].nunique() > 1:
        figures.append(("data_mb", "data MiB"))
    title = f"memory and samples/s per cell ({SPREAD})"
    return title, cells_table(s.assign(mem_mb=mem), axes(s), figures)


def size_axis(s: pd.DataFrame) -> Key | None:
    """The parameter that sets the problem's size, where it varies and every value reads as one."""
    varied = {k.column: k for k in axes(s)}
    for name in SIZE_PARAMS:
        k = varied.get(f"{PARAM}{name}")
        if k is not None and all(math.isfinite(size_of(v)) for v in s[k.column].dropna()):
            return k
    return None


def _exponent(g: pd.DataFrame, key: Key, y: pd.Series) -> tuple[float, tuple[float, float]] | None:
    """The fitted exponent b of y ~ size^b over the runs (log-log least squares), with its
    interval."""
    x = np.log(g[key.column].map(size_of).astype(float))
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
    others = [k for k in _others(s) if k != key]
    groups = list(rows.groupby(columns(others), sort=False)) if others else [((), rows)]
    labels = sorted(dict.fromkeys(s[key.column].dropna()), key=size_of)
    fits = []
    for k, g in groups:
        found = (_exponent(g, key, g["mem_mb"]), _exponent(g, key, g["step_ms"]))
        named = name_of(others, k if isinstance(k, tuple) else (k,)) if others else ""
        fits.append((named, *found))
    times = size_of(labels[-1]) / size_of(labels[0])
    growth = (
        f"From {key.name}={labels[0]} to {labels[-1]} ({times:.1f}x the size), {measure} "
        f"grows as {_powers(fits, 1)} and step time as {_powers(fits, 2)}"
    )
    return growth + _predicted(rows) + _missing(s, [key, *others])


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


def _missing(s: pd.DataFrame, keys: list[Key]) -> str:
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


def epochs(s: pd.DataFrame) -> str:
    """The fixed and the per-epoch cost of a run: a least-squares line of wall time against
    epochs (per setting, the cheapest and dearest per epoch where settings vary)."""
    others = _others(s, "epochs")
    rows = s[s["status"] == "ok"]
    groups = list(rows.groupby(columns(others), sort=False)) if others else [((), rows)]
    fits = [
        (
            name_of(others, k if isinstance(k, tuple) else (k,)) if others else "",
            fit_line(g["epochs"], g["wall_s"]),
        )
        for k, g in groups
    ]
    fits = [(n, f) for n, f in fits if f is not None]
    if not fits:
        return "No setting finished at two or more epoch counts: no per-epoch cost to state."
    if len(fits) == 1:
        label, f = fits[0]
        ci = "; ".join(
            p
            for p in (interval(*f.slope_ci, "s per epoch"), interval(*f.intercept_ci, "s fixed"))
            if p
        )
        return (
            f"Wall time = {format_number(f.intercept)} s fixed + {format_number(f.slope)} s "
            f"per epoch (least squares over {f.n} runs{'; ' + ci if ci else ''})."
        )
    cheap, dear = min(fits, key=lambda x: x[1].slope), max(fits, key=lambda x: x[1].slope)
    apart = cheap[1].slope_ci[1] < dear[1].slope_ci[0]
    return (
        f"Per epoch: {cheap[0]} costs least, {_cost(cheap[1])}; {dear[0]} most, "
        f"{_cost(dear[1])}"
        f"{'' if apart else ' (no significant difference: the 95% intervals overlap)'}."
    )


def _cost(f) -> str:
    ci = interval(*f.slope_ci)
    return (
        f"{format_number(f.slope)} s per epoch{' (' + ci + ')' if ci else ''} + "
        f"{format_number(f.intercept)} s fixed"
    )


def epochs_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    return pivot_title("wall_s"), pivot(s, "wall_s", "epochs", "device", missing_ok=True)


def single(s: pd.DataFrame) -> str:
    """A study of one cell: its throughput, wall time and memory."""
    mem, measure = peak_memory(s)
    speed, wall = cells(s, "samples_per_s", []), cells(s, "wall_s", [])
    memory = cells(s.assign(mem_mb=mem), "mem_mb", [])
    if not speed:
        return f"No run finished ({'/'.join(sorted(set(s['status'])))})."
    n = len(speed[0].values)
    parts = [
        speed[0].amount(SPS),
        f"{wall[0].amount('s')} wall" if wall else "",
        f"{memory[0].amount('MiB')} {measure}" if memory else "",
    ]
    return f"One cell, {n} run{'s' if n > 1 else ''}: " + ", ".join(p for p in parts if p) + "."


def single_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    mem, measure = peak_memory(s)
    figures = [("samples_per_s", SPS), ("wall_s", "wall s"), ("mem_mb", f"{measure} MiB")]
    return f"the cell ({SPREAD})", cells_table(s.assign(mem_mb=mem), [], figures)
