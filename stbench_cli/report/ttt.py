"""Time to target over repeats, scored as MLPerf Training scores a result (pure).

MLPerf Training runs a benchmark several times (10 for most), drops the fastest and the
slowest run and averages the rest ("olympic" scoring). A run that does not reach the target
counts as the slowest, so one such run is dropped with it; two or more leave the result
unscored. stbench applies the same rule to a cell's repeats, and prints beside it the median
± 95% interval of the runs that reached the target and how many did: with few repeats the
rule is a convention, not a statistic. A run that ended in any status but ok (diverged,
oom, failed, timeout) did not reach its target; a skipped cell never ran and is not a run.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from .frame import keys_of, varying
from .stats import ci95, format_number

TITLE = ("time to target (s): MLPerf score (fastest and slowest run dropped, a miss counts as the slowest), "
         "median ± 95% CI of the runs that reached it")


def olympic(times: list[float]) -> tuple[float, str]:
    """(score, how it was scored) of one cell's runs; a time of inf did not reach the target."""
    n, missed = len(times), sum(1 for t in times if not math.isfinite(t))
    if n == 0:
        return math.nan, "no runs"
    if missed > (1 if n >= 3 else 0):
        return math.nan, f"not scored: {missed} of {n} runs missed"
    kept = sorted(times)[1:-1] if n >= 3 else times  # inf sorts last: a missed run is the one dropped
    return float(np.mean(kept)), f"mean of {len(kept)}" + (" (none dropped: < 3 runs)" if n < 3 else "")


def _runs(w: pd.DataFrame) -> pd.DataFrame:
    """The rows that are runs with a target: skipped cells never ran; an older row has no target."""
    if "target" not in w.columns:
        return w.iloc[0:0]
    return w[(w["status"] != "skipped") & w["target"].notna()]


def _reached(runs: pd.DataFrame) -> pd.Series:
    return (runs["status"] == "ok") & (runs["target_reached"] == 1)


def _line(g: pd.DataFrame) -> dict:
    ok = _reached(g)
    times = [float(t) if hit else math.inf for t, hit in zip(g["time_to_target_s"], ok)]
    score, how = olympic(times)
    hit = g[ok]
    med = float(hit["time_to_target_s"].median()) if len(hit) else math.nan
    lo, hi = ci95(hit["time_to_target_s"].tolist())
    spread = f" ± {format_number((hi - lo) / 2)}" if math.isfinite(lo) else ""
    return {
        "target": format_number(float(g["target"].median())),
        "reached": f"{len(hit)}/{len(g)}",
        "mlperf_s": format_number(score) if math.isfinite(score) else how,
        "scored_as": how if math.isfinite(score) else "",
        "median_s": format_number(med) + spread if len(hit) else "not reached",
        "no_eval_s": format_number(float(hit["time_to_target_train_s"].median())) if len(hit) else "-",
        "epochs": format_number(float(hit["epochs_to_target"].median())) if len(hit) else "-",
        "epochs_done": format_number(float(g["epochs_done"].median())),
    }


def ttt_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per workload, one line per cell that had a target (repeats pooled)."""
    runs = _runs(df)
    keys = keys_of(df)
    out = {}
    for workload, w in runs.groupby("workload", sort=True):
        shown = [k for k in varying(w, keys) if k != "repeat"] or ["label"]
        names = ["device" if k == "label" else k.removeprefix("p.") for k in shown]
        lines = [{**dict(zip(names, key if isinstance(key, tuple) else (key,))), **_line(g)}
                 for key, g in w.groupby(shown, sort=True, dropna=False)]
        table = pd.DataFrame(lines)
        table.attrs["keys"] = names  # what tells the lines apart: a narrow terminal repeats them (report.fit)
        out[workload] = table
    return out


def asked(df: pd.DataFrame) -> bool:
    """Whether a study asked about time to quality (a time budget or a stop at the target): its
    answer belongs in the headline even where no run reached the target."""
    return _any_params(df, lambda p: bool(p.get("time_budget")) or bool(p.get("stop_at_target")))


def budgeted(df: pd.DataFrame) -> bool:
    """Whether a study trained under a time budget (its wall time is the budget, by design)."""
    return _any_params(df, lambda p: bool(p.get("time_budget")))


def _any_params(df: pd.DataFrame, test) -> bool:
    rows = df["params"] if "params" in df.columns else []
    return any(test(json.loads(p) if isinstance(p, str) and p else {}) for p in rows)


def reached_any(df: pd.DataFrame) -> bool:
    """Whether any run of these rows reached its target."""
    return bool(_reached(_runs(df)).any())


def ttt_speedup(gn: pd.DataFrame, base: pd.DataFrame) -> str:
    """The scaling table's time-to-target speedup of a world against the smallest: median
    times of the runs that reached the target ("-" where either has none)."""
    if "time_to_target_s" not in gn.columns:
        return "-"
    a, b = base["time_to_target_s"].dropna(), gn["time_to_target_s"].dropna()
    if a.empty or b.empty:
        return "-"
    return f"{a.median() / b.median():.2f}x"
