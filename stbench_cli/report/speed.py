"""Findings of the studies that ask how fast: hardware against hardware, precision and
compilation (pure: a study's rows in, one or two sentences and the table behind them out;
data-parallel scaling is scaling.py's, the batch size cost.py's).
"""

from __future__ import annotations

import math

import pandas as pd

from . import tables
from .cells import Cell, cells, contrast, differs, ratio
from .labels import format_number, hardware_order
from .model import HARDWARE, Key, axes, first_axes
from .tables import SPREAD, cells_table
from .ttt import reached, runs

SPS = "samples/s"
FIGURE = [("samples_per_s", SPS)]


def device(s: pd.DataFrame) -> str:
    """Each other hardware against the first (CPUs first): samples/s, time to target and energy."""
    order = hardware_order(s)
    found = sorted(dict.fromkeys(s[s["status"] == "ok"]["label"]), key=order.get)
    others = [k for k in axes(s) if k != HARDWARE]
    if len(found) < 2:
        only = found[0] if found else "no hardware"
        return f"Only {only} finished a run: nothing to compare."
    base, parts = found[0], []
    for label in found[1:]:
        pairs = _pairs(s, base, label, others, "samples_per_s")
        if not pairs:
            continue
        if len(pairs) == 1:
            text = f"{label} against {base}: {contrast(*pairs[0], unit=SPS)}"
        else:
            rs = [ratio(a, b) for a, b in pairs]
            lo, hi = f"{min(rs):.2f}x", f"{max(rs):.2f}x"
            span = lo if lo == hi else f"from {lo} to {hi}"
            text = (
                f"{label} against {base}: {span} the samples/s over {len(pairs)} cells "
                f"(significant in {sum(differs(a, b) for a, b in pairs)} of {len(pairs)})"
            )
        parts.append(text + _device_extras(s, base, label, others))
    return ". ".join(parts) + "." if parts else f"No cell ran on both {base} and another machine."


def _pairs(
    s: pd.DataFrame, base: str, label: str, others: list[Key], metric: str
) -> list[tuple[Cell, Cell]]:
    """(base cell, other cell) for each setting both hardware ran."""
    a = {c.name: c for c in cells(s[s["label"] == base], metric, others)}
    b = {c.name: c for c in cells(s[s["label"] == label], metric, others)}
    return [(a[k], b[k]) for k in a if k in b]


def _device_extras(s: pd.DataFrame, base: str, label: str, others: list[Key]) -> str:
    """Time to target (median of the runs that reached it) and energy per run, where measured."""
    out = []
    r = runs(s)
    pairs = _pairs(r[reached(r)], base, label, others, "time_to_target_s")
    if len(pairs) == 1:
        out.append(f"time to target {contrast(*pairs[0], unit='s', higher_is_better=False)}")
    energy = s.assign(energy_j=s[["gpu_energy_j", "cpu_energy_j"]].sum(axis=1, min_count=1))
    pairs = _pairs(energy, base, label, others, "energy_j")
    if len(pairs) == 1:
        said = contrast(*pairs[0], unit="J", higher_is_better=False, words=("less", "more"))
        out.append(f"energy per run {said}")
    return "; " + "; ".join(out) if out else ""


def device_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    rows = next((k.name for k in axes(s) if k != HARDWARE), "epochs")
    table = tables.pivot(s, "samples_per_s", rows, "device", tables.FIRST)
    return f"samples/s by hardware ({SPREAD}), against the first column", table


def is_eager_fp32(key: dict) -> bool:
    return str(key.get("precision", "fp32")) in ("fp32", "-") and str(
        key.get("compile", "none")
    ) in ("none", "-")


def _eager(keys: list[Key], sweep: list[Cell]) -> Cell | None:
    """The fp32 eager cell of a sweep: the baseline of precision and compilation."""
    return next(
        (c for c in sweep if is_eager_fp32(dict(zip((k.name for k in keys), c.shown)))), None
    )


def precision(s: pd.DataFrame) -> str:
    """Each precision/compile cell against fp32 eager: samples/s, compile seconds and the steps
    it takes the faster step to pay the compilation back."""
    keys = [k for k in first_axes(s, "precision", "compile") if k != HARDWARE]
    sweep = cells(s, "samples_per_s", keys)
    base = _eager(keys, sweep)
    if base is None:
        return (
            "No fp32 eager cell finished: no baseline to compare precision and compilation against."
        )
    parts = [
        f"{c.name}: {contrast(base, c, amounts=False)}{_payback(s, keys, base, c)}"
        for c in sweep
        if c is not base
    ]
    return f"Against fp32 eager ({base.amount(SPS)}): " + "; ".join(parts) + "."


def _payback(s: pd.DataFrame, keys: list[Key], base: Cell, cell: Cell) -> str:
    """', compile 12.3 s, pays back after 4,500 steps' for a compiled cell ('' for an eager one)."""
    compiled = {c.key: c for c in cells(s, "compile_s", keys)}.get(cell.key)
    if compiled is None or not any(v > 0 for v in compiled.values):
        return ""
    step = s.assign(step_s=s["global_batch_size"] / s["samples_per_s"])
    per_step = {c.key: c.median for c in cells(step, "step_s", keys)}
    saved, seconds = per_step[base.key] - per_step[cell.key], format_number(compiled.median)
    if not saved > 0:
        return f", compile {seconds} s, never pays back (no faster per step)"
    return f", compile {seconds} s, pays back after {math.ceil(compiled.median / saved):,} steps"


def precision_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    keys = first_axes(s, "precision", "compile")
    table = cells_table(s, keys, FIGURE)
    sweep = cells(s, "samples_per_s", keys)
    base = _eager(keys, sweep)
    said = {c.shown: "baseline" if c is base else _against(base, c) for c in sweep} if base else {}
    compiled = {c.shown: format_number(c.median) for c in cells(s, "compile_s", keys)}
    rows = [tuple(r) for r in table[table.attrs["keys"]].itertuples(index=False)]
    table["vs fp32 eager"] = [said.get(r, "-") for r in rows]
    table["compile s"] = [compiled.get(r, "-") for r in rows]
    return f"samples/s ({SPREAD}) against fp32 eager, and the median seconds spent compiling", table


def _against(base: Cell, c: Cell) -> str:
    """pyperf's table wording: the ratio, or "not significant" (how it was judged is the
    finding's to say)."""
    text = contrast(base, c, amounts=False, note=False).partition(" (")[0]
    return "not significant" if text.startswith("no significant") else text
