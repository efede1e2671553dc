"""Findings of the studies that ask what a setting costs: memory against throughput (strategies,
checkpointing, any other setting), how memory and step time grow with the problem, and the
fixed and per-epoch cost of a run (pure: a study's rows in, one or two sentences out)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..order import size_of
from ..stats import format_number
from .cells import axes, cells, contrast, fit_line, interval, name, not_ok, ok, one_run, peak_memory, rank_memory

SPS = "samples/s"
SIZE_PARAMS = ("p.grid", "p.size", "p.n_samples", "p.n_nodes")  # parameters that set the problem's size


def tradeoff(s: pd.DataFrame) -> str:
    """The cell that holds the least memory per rank against the fastest (or, where that is the
    fastest too, against the one that holds the most); where memory hardly differs, the fastest
    cell against the slowest."""
    keys = [k for k in axes(s) if k != "label"]
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
        pair = (f"the fastest, {fastest.name} ({fastest.amount(SPS)}), and the slowest, {slowest.name} "
                f"({slowest.amount(SPS)})")
        lead = (f"No significant difference in samples/s between {pair}" if said.startswith("no significant")
                else f"Fastest: {fastest.name} ({fastest.amount(SPS)}), {said} than the slowest, {slowest.name} "
                     f"({slowest.amount(SPS)})")
        return f"{lead}{same}{_once(fastest, slowest)}." + _data_note(s, keys)
    least = min(memory, key=lambda c: c.median)
    ref = (next(c for c in memory if c.key == fastest.key) if least.key != fastest.key
           else max(memory, key=lambda c: c.median))
    against = f"the fastest cell, {ref.name}" if ref.key == fastest.key else ref.name
    held = contrast(ref, least, higher_is_better=False, words=("less", "more"), amounts=False, note=False)
    cost = contrast(speed[ref.key], speed[least.key], amounts=False, note=False)
    return (f"{least.name} holds the least memory per rank, {least.amount('MiB')} {measure}: {held} than "
            f"{against} ({ref.amount('MiB')}); in samples/s it is {cost} "
            f"({speed[least.key].amount()} vs {speed[ref.key].amount(SPS)}){_once(least, ref)}.") + _data_note(s, keys)


def _once(*cells) -> str:
    return "; one run per cell: no interval" if one_run(*cells) else ""


def _data_note(s: pd.DataFrame, keys: list[str]) -> str:
    """Where the data held in memory differs by more than 10% between cells, the extremes."""
    data = cells(s, "data_mb", keys) if "data_mb" in s.columns else []
    if len(data) < 2:
        return ""
    lo, hi = min(data, key=lambda c: c.median), max(data, key=lambda c: c.median)
    if not hi.median > 1.1 * lo.median:
        return ""
    return f" Data in memory: {lo.amount('MiB')} ({lo.name}) against {hi.amount('MiB')} ({hi.name})."


def size_axis(s: pd.DataFrame) -> str | None:
    """The parameter that sets the problem's size, where it varies and every value reads as a size."""
    for key in SIZE_PARAMS:
        if key in axes(s) and all(math.isfinite(size_of(v)) for v in s[key].dropna()):
            return key
    return None


def _exponent(g: pd.DataFrame, key: str, y: pd.Series) -> tuple[float, tuple[float, float]] | None:
    """The fitted exponent b of y ~ size^b over the runs (log-log least squares), with its interval."""
    x = np.log(g[key].map(size_of).astype(float))
    fit = fit_line(x, np.log(y.where(y > 0).astype(float)))
    return (fit.slope, fit.slope_ci) if fit else None


def size(s: pd.DataFrame) -> str:
    """How peak memory and step time grow with the problem: fitted exponents per setting, and the
    measured memory against the workload's prediction where it made one."""
    key = size_axis(s)
    rows = ok(s)
    mem, measure = peak_memory(rows)
    step_ms = 1000 * rows.get("global_batch_size", rows["batch_size"]).astype(float) / rows["samples_per_s"]
    rows = rows.assign(mem_mb=mem, step_ms=step_ms)
    others = [k for k in axes(s) if k not in (key, "label")]
    groups = list(rows.groupby(others, sort=False)) if others else [((), rows)]
    labels = sorted(dict.fromkeys(s[key].dropna()), key=size_of)
    fits = []
    for k, g in groups:
        found = (_exponent(g, key, g["mem_mb"]), _exponent(g, key, g["step_ms"]))
        fits.append((name(others, k if isinstance(k, tuple) else (k,)) if others else "", *found))
    growth = (f"From {short_key(key)}={labels[0]} to {labels[-1]} ({size_of(labels[-1]) / size_of(labels[0]):.1f}x the "
              f"size), {measure} grows as {_powers(fits, 1)} and step time as {_powers(fits, 2)}")
    return growth + _predicted(rows) + _missing(s, [key, *others])


def short_key(key: str) -> str:
    return key.removeprefix("p.")


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
    return ", ".join(f"{'size' if j == 0 else ''}^{e[0]:.2f} ({label})" for j, (label, e) in enumerate(shown))


def _predicted(rows: pd.DataFrame) -> str:
    """'; measured 0.9–1.2x the predicted memory' where the workload predicted it."""
    if "predicted_mb" not in rows.columns:
        return ""
    r = (rows["mem_mb"] / rows["predicted_mb"]).replace([np.inf, -np.inf], np.nan).dropna()
    if r.empty:
        return ""
    lo, hi = float(r.min()), float(r.max())
    return f"; measured {lo:.2f}x the predicted memory" if round(lo, 2) == round(hi, 2) else \
        f"; measured {lo:.2f}–{hi:.2f}x the predicted memory"


def _missing(s: pd.DataFrame, keys: list[str]) -> str:
    gone = not_ok(s, keys)
    return "." + (f" Did not finish: {'; '.join(gone)}." if gone else "")


def epochs(s: pd.DataFrame) -> str:
    """The fixed and the per-epoch cost of a run: a least-squares line of wall time against
    epochs (per setting, the cheapest and dearest per epoch where settings vary)."""
    others = [k for k in axes(s) if k not in ("epochs", "label")]
    rows = ok(s)
    groups = list(rows.groupby(others, sort=False)) if others else [((), rows)]
    fits = [(name(others, k if isinstance(k, tuple) else (k,)) if others else "", fit_line(g["epochs"], g["wall_s"]))
            for k, g in groups]
    fits = [(n, f) for n, f in fits if f is not None]
    if not fits:
        return "No setting finished at two or more epoch counts: no per-epoch cost to state."
    if len(fits) == 1:
        label, f = fits[0]
        ci = "; ".join(p for p in (interval(*f.slope_ci, "s per epoch"), interval(*f.intercept_ci, "s fixed")) if p)
        return (f"Wall time = {format_number(f.intercept)} s fixed + {format_number(f.slope)} s per epoch "
                f"(least squares over {f.n} runs{'; ' + ci if ci else ''}).")
    cheap, dear = min(fits, key=lambda x: x[1].slope), max(fits, key=lambda x: x[1].slope)
    apart = cheap[1].slope_ci[1] < dear[1].slope_ci[0]
    return (f"Per epoch: {cheap[0]} costs least, {_cost(cheap[1])}; {dear[0]} most, {_cost(dear[1])}"
            f"{'' if apart else ' (no significant difference: the 95% intervals overlap)'}.")


def _cost(f) -> str:
    ci = interval(*f.slope_ci)
    return f"{format_number(f.slope)} s per epoch{' (' + ci + ')' if ci else ''} + {format_number(f.intercept)} s fixed"


def single(s: pd.DataFrame) -> str:
    """A study of one cell: its throughput, wall time and memory."""
    mem, measure = peak_memory(s)
    speed, wall = cells(s, "samples_per_s", []), cells(s, "wall_s", [])
    memory = cells(s.assign(mem_mb=mem), "mem_mb", [])
    if not speed:
        return f"No run finished ({'/'.join(sorted(set(s['status'])))})."
    n = len(speed[0].values)
    parts = [speed[0].amount(SPS), f"{wall[0].amount('s')} wall" if wall else "",
             f"{memory[0].amount('MiB')} {measure}" if memory else ""]
    return f"One cell, {n} run{'s' if n > 1 else ''}: " + ", ".join(p for p in parts if p) + "."

