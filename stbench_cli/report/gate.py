"""The regression gate: a new run's cells against a baseline's, judged as `compare` judges a
ratio (pyperf/asv style), never by a bare ratio.

Each cell and metric gets one verdict:
- `regression`: worse than its baseline by more than the margin *and* the difference is
  significant (both sides have >= 2 repeats, their 95% intervals do not overlap, Welch's
  t-test p < 0.05: stats.significant), or it ended ok in the baseline and not now;
- `inconclusive`: worse by more than the margin but not significant: the repeats cannot tell a
  slowdown from noise, and the verdict names the repeats per side that could
  (stats.repeats_needed); never `ok`, since a 30% slowdown on one repeat is not a pass;
- `unchanged`: the medians differ by less than 0.05%, which the line would print as 0.0%
  (so it never reads "0.0% better");
- `ok`: better, or worse within the margin.
Cells are matched by what ran (workload, device kind, strategy, world, batch, epochs,
parameters), not by machine: CI runners change hosts. Pure: rows in, verdicts out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..device import parse
from ..errors import StbenchError
from .stats import HIGHER_IS_BETTER, format_number, repeats_needed, significant
from .frame import CELL_KEYS, frame, summarize

UNCHANGED = 0.0005  # a relative change the line would print as 0.0%


@dataclass(frozen=True)
class Verdict:
    cell: str  # the cell in one line
    metric: str
    base: float
    new: float
    change: float  # relative change in the worse direction (+0.30: 30% worse)
    significant: bool
    kind: str  # regression, inconclusive, unchanged, ok, or "no value"
    repeats: tuple[int, int] = (0, 0)  # ok repeats on the baseline's side and the new side
    needs: int = 0  # inconclusive: the repeats per side that could make it significant
    note: str = ""

    @property
    def regression(self) -> bool:
        return self.kind == "regression"


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
    b, n, repeats = m["median_b"], m["median_n"], (int(m["n_b"]), int(m["n_n"]))
    if m["status_b"] == "ok" and m["status_n"] != "ok":
        return Verdict(cell, metric, b, n, math.inf, True, "regression", repeats,
                       note=f"ended {m['status_n']} (ok in the baseline)")
    if not (math.isfinite(b) and math.isfinite(n)) or b == 0:
        return Verdict(cell, metric, b, n, math.nan, False, "no value", repeats, note="no value on one side")
    change = (b - n) / b if metric in HIGHER_IS_BETTER else (n - b) / b
    values = list(m["values_b"]), list(m["values_n"])
    sig = significant(*values)
    if abs(change) < UNCHANGED:
        return Verdict(cell, metric, b, n, change, sig, "unchanged", repeats)
    if change <= margin:
        return Verdict(cell, metric, b, n, change, sig, "ok", repeats)
    if sig:
        return Verdict(cell, metric, b, n, change, sig, "regression", repeats)
    return Verdict(cell, metric, b, n, change, sig, "inconclusive", repeats, repeats_needed(*values))


ORDER = {"regression": 0, "inconclusive": 1, "no value": 2, "ok": 3, "unchanged": 4}


def line(v: Verdict, margin: float) -> str:
    """One verdict as pyperf words it: the values, the change, and what it means."""
    head = f"{v.kind.upper() if v.kind in ('regression', 'inconclusive') else v.kind:<12} {v.cell}: {v.metric}"
    values = f"{head} {format_number(v.base)} -> {format_number(v.new)}"
    if v.note:
        return f"{values}: {v.note}"
    if v.kind == "unchanged":
        return values
    change = f"{values}, {100 * abs(v.change):.1f}% {'worse' if v.change > 0 else 'better'}"
    if v.kind == "inconclusive":
        b, n = v.repeats
        ran = f"{b} repeat{'s' * (b != 1)}" if b == n else f"{b} vs {n} repeats"
        return f"{change} with {ran}: inconclusive (needs ≥ {v.needs} repeats)"
    within = f", within the {100 * margin:.0f}% margin" if v.change > 0 and v.kind == "ok" else ""
    return f"{change} ({'significant' if v.significant else 'not significant'}{within})"


def lines(verdicts: list[Verdict], margin: float) -> list[str]:
    """One line per verdict, regressions first, then the inconclusive, then the rest."""
    out = [line(v, margin) for v in sorted(verdicts, key=lambda v: (ORDER[v.kind], v.cell, v.metric))]
    count = {kind: sum(v.kind == kind for v in verdicts) for kind in ORDER}
    out.append(f"{count['regression']} regression(s), {count['inconclusive']} inconclusive in {len(verdicts)} "
               f"comparison(s) (margin {100 * margin:.0f}%, 95% intervals and Welch's t-test)")
    return out


def exit_code(verdicts: list[Verdict]) -> int:
    """1 on a regression; 3 where none is proven but one is inconclusive (a CI fails on it too,
    unless it allows 3: rerun with more repeats); 0 otherwise."""
    if any(v.regression for v in verdicts):
        return 1
    return 3 if any(v.kind == "inconclusive" for v in verdicts) else 0
