"""The regression gate: a new run's cells against a baseline's, judged as `compare` judges a
ratio (pyperf/asv style), never by a bare ratio.

A cell regresses when it is worse than its baseline by more than the margin *and* the
difference is significant (both sides have >= 2 repeats, their 95% intervals do not overlap,
Welch's t-test p < 0.05: stats.significant), or when it ended ok in the baseline and not now.
Cells are matched by what ran (workload, device kind, strategy, world, batch, epochs,
parameters), not by machine: CI runners change hosts. Pure: rows in, verdicts out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..device import parse
from ..errors import StbenchError
from .stats import HIGHER_IS_BETTER, format_number, significant
from .frame import CELL_KEYS, frame, summarize


@dataclass(frozen=True)
class Verdict:
    cell: str  # the cell in one line
    metric: str
    base: float
    new: float
    change: float  # relative change in the worse direction (+0.30: 30% worse)
    significant: bool
    regression: bool
    note: str = ""


def _frames(base: list[dict], new: list[dict]) -> pd.DataFrame:
    # the side travels in `study`, the one free-text column frame() keeps as it is
    df = frame([{**r, "study": "base"} for r in base] + [{**r, "study": "new"} for r in new])
    df["label"] = [parse(d).kind for d in df["device"]]  # the device kind, whichever host ran it
    return df


def _cell_name(key: dict) -> str:
    parts = [str(key["workload"]), str(key["label"]), str(key["strategy"])]
    parts += [f"{k}={key[k]}" for k in (*CELL_KEYS[1:], *sorted(k for k in key if k.startswith("p.")))
              if k in key and k != "strategy"]
    return " ".join(parts)


def gate(base: list[dict], new: list[dict], metrics: tuple[str, ...] = ("wall_s",),
         margin: float = 0.10) -> list[Verdict]:
    """One verdict per cell present on both sides and metric."""
    df = _frames(base, new)
    out = []
    for metric in metrics:
        sides = {side: summarize(df[df["study"] == side], metric) for side in ("base", "new")}
        keys = [c for c in sides["base"].columns if c not in ("n", "n_all", "values", "median", "lo", "hi", "status")]
        merged = sides["base"].merge(sides["new"], on=keys, suffixes=("_b", "_n"))
        if merged.empty:
            raise StbenchError("no cell of the new run matches a cell of the baseline (same workload, device kind, "
                               "strategy, world, batch size, epochs and parameters)")
        for _, m in merged.iterrows():
            out.append(_verdict(_cell_name({k: m[k] for k in keys}), metric, m, margin))
    return out


def _verdict(cell: str, metric: str, m, margin: float) -> Verdict:
    if m["status_b"] == "ok" and m["status_n"] != "ok":
        return Verdict(cell, metric, m["median_b"], m["median_n"], math.inf, True, True,
                       f"ended {m['status_n']} (ok in the baseline)")
    b, n = m["median_b"], m["median_n"]
    if not (math.isfinite(b) and math.isfinite(n)) or b == 0:
        return Verdict(cell, metric, b, n, math.nan, False, False, "no value on one side")
    change = (b - n) / b if metric in HIGHER_IS_BETTER else (n - b) / b
    sig = significant(list(m["values_b"]), list(m["values_n"]))
    note = "" if min(m["n_b"], m["n_n"]) >= 2 else "fewer than 2 repeats: cannot be significant"
    return Verdict(cell, metric, b, n, change, sig, sig and change > margin, note)


def lines(verdicts: list[Verdict], margin: float) -> list[str]:
    """One line per verdict, regressions first."""
    out = []
    for v in sorted(verdicts, key=lambda v: (not v.regression, v.cell, v.metric)):
        word = "REGRESSION" if v.regression else "ok"
        change = (f"{100 * abs(v.change):.1f}% {'worse' if v.change > 0 else 'better'}"
                  if math.isfinite(v.change) else "no change measured")
        sig = "significant" if v.significant else "not significant"
        text = f"{word:<10} {v.cell}: {v.metric} {format_number(v.base)} -> {format_number(v.new)} ({change}, {sig})"
        out.append(text + (f"; {v.note}" if v.note else ""))
    bad = sum(v.regression for v in verdicts)
    out.append(f"{bad} regression(s) in {len(verdicts)} comparison(s) (margin {100 * margin:.0f}%, 95% intervals "
               "and Welch's t-test)")
    return out
