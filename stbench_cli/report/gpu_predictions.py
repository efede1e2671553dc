"""The predicted half of a gpu-vs-cpu answer (runner/predictions.py wrote predicted.csv): each
GPU's most and estimated gain over the CPU's best measured step, size by size, and what bounds
each step with the lever that would move it. Marked predicted wherever it shows, never pooled
with the measured rows (report/gpu_vs_cpu.py answers those)."""

from __future__ import annotations

import math

import pandas as pd

from ..comparison import number
from .gpu_vs_cpu import has_gpu, points, size_count, unit_of, whole

PREDICTED_TITLE = (
    "PREDICTED on GPUs, not measured: the most each could gain over the CPU's best, in times "
    "its samples/s (<=, from a lower bound on its step), and an estimate (~)"
)
SHORT_BOUND = {
    "memory bandwidth": "bandwidth",
    "the host link": "host link",
    "the host": "host",
    "the host's data loading": "data loading",
}


def _times(value) -> str:
    """A predicted ratio: two figures below 10, whole above."""
    v = float(value)
    return f"{v:.2g}" if v < 10 else f"{v:,.0f}"


def predicted_table(predicted: pd.DataFrame, s: pd.DataFrame) -> pd.DataFrame | None:
    """One line per size: each GPU's most and estimated gain over the CPU's
    fastest measured step (a step that does not fit the card's memory says so), and what
    bounds the step: the last card's, and each other card's where it differs."""
    if predicted is None or predicted.empty:
        return None
    unit, lines = unit_of(s), []
    gpus = list(dict.fromkeys(predicted["gpu"]))
    # a GPU that ran: its measured ratio beside the prediction, size by size (points once)
    measured = {str(p.size): p.vs_tuned.text() for p in points(s)} if has_gpu(s) else None
    for size, here in predicted.groupby("size", sort=False):
        count = size_count(s, size)
        line = {unit or "size": whole(count) if math.isfinite(count) else str(size)}
        for gpu in gpus:
            r = here[here["gpu"] == gpu]
            if r.empty:
                continue
            r = r.iloc[0]
            if str(r["fits"]) == "False":
                line[gpu] = "does not fit"
                continue
            most, guess = r["most_gain"], r["estimated_gain"]
            line[gpu] = f"<={_times(most)} ~{_times(guess)}" if (number(most) or 0) > 0 else "-"
        if measured is not None:
            line["GPU measured"] = measured.get(str(size), "-")
        line["bound"] = _bounds(here, gpus)
        lines.append(line)
    table = pd.DataFrame(lines)
    table.attrs["keys"] = [table.columns[0]]
    return table


def _bounds(here: pd.DataFrame, gpus: list[str]) -> str:
    """What bounds a size's step: the last card's, then each other card whose bound differs
    ('bandwidth; T4 FLOPs')."""
    by = {g: str(r["bound_by"]) for g in gpus for _, r in here[here["gpu"] == g].iterrows()}
    if not by:
        return "-"
    last = by.get(gpus[-1], next(iter(by.values())))
    others = [f"{g} {SHORT_BOUND.get(b, b)}" for g, b in by.items() if b != last]
    return "; ".join([SHORT_BOUND.get(last, last), *others])


def predicted_levers(predicted: pd.DataFrame) -> str:
    """What bounds the predicted steps and the lever that would move each, once; and which card
    is this machine's (predicted from its own host: plan/predict.py's Gpu.measured_here)."""
    if predicted is None or predicted.empty:
        return ""
    said = dict(zip(predicted["bound_by"], predicted["lever"]))
    text = "; ".join(f"bound by {k}: {v}" for k, v in said.items())
    here = predicted.get("measured_here")  # absent from files written before it was kept
    local = (
        [] if here is None else list(dict.fromkeys(predicted["gpu"][here.astype(str) == "True"]))
    )
    if local:
        text += (
            f"; {', '.join(local)} is this machine's: bounded by its host's own "
            "time, loading and cost of an operator"
        )
    fits = predicted["fits"].astype(str)
    memory = pd.to_numeric(predicted.get("memory_mb", pd.Series(dtype=float)), errors="coerce")
    most = f"{memory.max():,.0f} MiB" if memory.notna().any() else ""
    if (fits == "True").all():
        return f"{text}; every size fits each card's memory (a step's predicted, at most {most})"
    if (fits == "False").any():
        return f"{text}; 'does not fit': a step's predicted memory (to {most}) exceeds the card's"
    return f"{text}; whether it fits: no memory predicted for this study"
