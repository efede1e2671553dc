"""Findings of the studies that ask how fast: hardware against hardware, processes and nodes,
batch size, precision and compilation (pure: a study's rows in, one or two sentences out)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..frame import hardware_order
from ..stats import format_number
from ..ttt import _reached, _runs
from .cells import Cell, axes, cells, contrast, differs, name, ok, ratio

SPS = "samples/s"


def device(s: pd.DataFrame) -> str:
    """Each other hardware against the first (CPUs first): samples/s, time to target and energy."""
    order = hardware_order(s)
    labels = sorted(dict.fromkeys(ok(s)["label"]), key=order.get)
    others = [k for k in axes(s) if k != "label"]
    if len(labels) < 2:
        return "Only " + (labels[0] if labels else "no hardware") + " finished a run: nothing to compare."
    base, parts = labels[0], []
    for label in labels[1:]:
        pairs = _pairs(s, base, label, others, "samples_per_s")
        if not pairs:
            continue
        if len(pairs) == 1:
            text = f"{label} against {base}: {contrast(*pairs[0], unit=SPS)}"
        else:
            rs = [ratio(a, b) for a, b in pairs]
            span = f"{min(rs):.2f}x" if f"{min(rs):.2f}" == f"{max(rs):.2f}" else f"from {min(rs):.2f}x to {max(rs):.2f}x"
            text = (f"{label} against {base}: {span} the samples/s over {len(pairs)} cells (significant in "
                    f"{sum(differs(a, b) for a, b in pairs)} of {len(pairs)})")
        parts.append(text + _device_extras(s, base, label, others))
    return ". ".join(parts) + "." if parts else f"No cell ran on both {base} and another machine."


def _pairs(s: pd.DataFrame, base: str, label: str, others: list[str], metric: str) -> list[tuple[Cell, Cell]]:
    """(base cell, other cell) for each setting both hardware ran."""
    a = {c.key: c for c in cells(s[s["label"] == base], metric, others)}
    b = {c.key: c for c in cells(s[s["label"] == label], metric, others)}
    return [(a[k], b[k]) for k in a if k in b]


def _device_extras(s: pd.DataFrame, base: str, label: str, others: list[str]) -> str:
    """Time to target (median of the runs that reached it) and energy per run, where measured."""
    out = []
    runs = _runs(s)
    if len(runs):
        hit = runs[_reached(runs)]
        pairs = _pairs(hit, base, label, others, "time_to_target_s")
        if len(pairs) == 1:
            out.append(f"time to target {contrast(*pairs[0], unit='s', higher_is_better=False)}")
    energy = s.assign(energy_j=s.reindex(columns=["gpu_energy_j", "cpu_energy_j"]).sum(axis=1, min_count=1))
    pairs = _pairs(energy, base, label, others, "energy_j")
    if len(pairs) == 1:
        out.append(f"energy per run {contrast(*pairs[0], unit='J', higher_is_better=False, words=('less', 'more'))}")
    return "; " + "; ".join(out) if out else ""


def _world_cells(g: pd.DataFrame) -> list[tuple[int, int, Cell, float]]:
    """(world, nodes, samples/s cell, median sync share of training time), smallest world first."""
    out = []
    for (world, nodes), gn in ok(g).groupby(["world_size", "nodes"], sort=True):
        share = (gn["sync_s"] / gn["train_s"]).replace([np.inf, -np.inf], np.nan).dropna()
        out.append((int(world), int(nodes), Cell("", tuple(gn["samples_per_s"].dropna().astype(float))),
                    float(share.median()) if len(share) else math.nan))
    return [w for w in out if w[2].values]


def _where(world: int, nodes: int) -> str:
    return f"{world} process{'es' if world > 1 else ''}" + (f" on {nodes} nodes" if nodes > 1 else "")


def scaling(s: pd.DataFrame) -> str:
    """Speedup, efficiency and sync share at the largest world against the smallest, and the
    world where efficiency first drops below 50%; with other settings, the best of them."""
    multi = s[s["strategy"] != "single"]
    others = [k for k in axes(multi) if k not in ("world_size", "nodes")]
    grouped = multi.groupby(others, sort=False) if others else [((), multi)]
    groups = [(key if isinstance(key, tuple) else (key,), _world_cells(g)) for key, g in grouped]
    groups = [(k, w) for k, w in groups if len(w) >= 2]
    if not groups:
        return "Fewer than two world sizes finished: no scaling to state."
    best, worlds = max(groups, key=lambda g: ratio(g[1][0][2], g[1][-1][2]))
    (w0, _, base, _), (world, nodes, top, share) = worlds[0], worlds[-1]
    speed = ratio(base, top)
    first = (f"At {_where(world, nodes)}: {speed:.2f}x the samples/s of {_where(w0, 1)} "
             f"({_standing(base, top)}), efficiency {100 * speed * w0 / world:.0f}%, "
             f"gradient sync {100 * share:.1f}% of training time")
    if len(groups) > 1:
        first += f" (best of {len(groups)} settings: {name(others, best)})"
    low = next(((w, n) for w, n, c, _ in worlds[1:] if 100 * ratio(base, c) * w0 / w < 50), None)
    second = (f"Efficiency first drops below 50% at {_where(*low)}." if low
              else f"Efficiency stays at 50% or more up to {_where(world, nodes)}.")
    return f"{first}. {second}"


def _standing(base: Cell, top: Cell) -> str:
    """Whether a speedup is beyond doubt, with the numbers: 'no significant difference: 9 ± 1
    vs 10 ± 2 samples/s', '95% intervals apart: ...', 'one run per cell: no interval: ...'."""
    shown = f"{top.amount()} vs {base.amount(SPS)}"
    if len(base.values) < 2 or len(top.values) < 2:
        return f"one run per cell, no interval: {shown}"
    return f"{'95% intervals apart' if differs(base, top) else 'no significant difference'}: {shown}"


def batch(s: pd.DataFrame) -> str:
    """Samples/s from the smallest to the largest batch, and the knee: the first batch from which
    doubling it gains less than 10% samples/s."""
    sweep = cells(s, "samples_per_s", ["batch_size"])
    if len(sweep) < 2:
        return "Fewer than two batch sizes finished: no sweep to state."
    first, last = sweep[0], sweep[-1]
    text = (f"Samples/s goes from {first.amount()} at batch {first.key[0]} to {last.amount()} at batch "
            f"{last.key[0]} ({contrast(first, last, amounts=False)}).")
    knee = _knee(sweep)
    if knee is None:
        return text + f" Every doubling up to batch {last.key[0]} gains 10% or more: no knee in this range."
    b, gain = knee
    return text + f" The knee is at batch {b}: a doubling beyond it gains {100 * gain:.1f}% (< 10%)."


def _knee(sweep: list[Cell]) -> tuple[int, float] | None:
    """(batch, gain per doubling after it) of the first batch whose next step gains < 10% per doubling."""
    for a, b in zip(sweep, sweep[1:]):
        doublings = math.log2(float(b.key[0]) / float(a.key[0]))
        gain = (b.median / a.median) ** (1 / doublings) - 1 if doublings > 0 and a.median > 0 else math.nan
        if math.isfinite(gain) and gain < 0.10:
            return a.key[0], gain
    return None


def is_eager_fp32(key: dict) -> bool:
    return str(key.get("p.precision", "fp32")) in ("fp32", "-") and str(key.get("p.compile", "none")) in ("none", "-")


def precision(s: pd.DataFrame) -> str:
    """Each precision/compile cell against fp32 eager: samples/s, compile seconds and the steps
    it takes the faster step to pay the compilation back."""
    keys = [k for k in ("p.precision", "p.compile") if k in axes(s)] + [
        k for k in axes(s) if k not in ("label", "p.precision", "p.compile")]
    sweep = cells(s, "samples_per_s", keys)
    base = next((c for c in sweep if is_eager_fp32(dict(zip(keys, c.key)))), None)
    if base is None:
        return "No fp32 eager cell finished: no baseline to compare precision and compilation against."
    parts = [f"{c.name}: {contrast(base, c, amounts=False)}{payback(s, keys, base, c)}" for c in sweep if c is not base]
    return f"Against fp32 eager ({base.amount(SPS)}): " + "; ".join(parts) + "."


def payback(s: pd.DataFrame, keys: list[str], base: Cell, cell: Cell) -> str:
    """', compile 12.3 s, pays back after 4,500 steps' for a compiled cell ('' for an eager one)."""
    rows = ok(s)[[tuple(r) == cell.key for r in ok(s)[keys].itertuples(index=False)]]
    compile_s = rows["compile_s"].dropna() if "compile_s" in rows.columns else pd.Series(dtype=float)
    if compile_s.empty or not (compile_s > 0).any():
        return ""
    seconds = float(compile_s.median())
    steps = rows.get("global_batch_size", rows["batch_size"]).astype(float)
    per_step_new = float((steps / rows["samples_per_s"]).median())
    base_rows = ok(s)[[tuple(r) == base.key for r in ok(s)[keys].itertuples(index=False)]]
    per_step_old = float((base_rows.get("global_batch_size", base_rows["batch_size"]).astype(float)
                          / base_rows["samples_per_s"]).median())
    saved = per_step_old - per_step_new
    if not saved > 0:
        return f", compile {format_number(seconds)} s, never pays back (no faster per step)"
    return f", compile {format_number(seconds)} s, pays back after {math.ceil(seconds / saved):,} steps"
