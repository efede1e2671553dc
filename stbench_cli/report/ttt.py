"""Time to target over repeats, scored as MLPerf Training scores a result (pure): the table of a
study's cells and its finding (which cell reached the target first, or that no difference is
beyond doubt).

MLPerf Training runs a benchmark several times (10 for most), drops the fastest and the
slowest run and averages the rest ("olympic" scoring). A run that does not reach the target
counts as the slowest, so one such run is dropped with it; two or more leave the result
unscored. stbench applies the same rule to a cell's repeats, and prints beside it the median
± 95% interval of the runs that reached the target and how many did: with few repeats the
rule is a convention, not a statistic. A run that ended in any status but ok (diverged,
oom, failed, timeout) did not reach its target; a skipped cell never ran and is not a run.

What a run costs on the way (`costs`): its joules (NVML's counter for the GPUs, RAPL
for the CPU packages, each with its method named in the row) and, at the prices a study was
given, its money to the target (else per million samples), one device's cells against
another's as ratios of their medians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..comparison import median
from .cells import Cell, contrast, differs
from .labels import format_number, natural, show
from .model import HARDWARE, Key, axes, columns, name_of
from .tables import heads

VALUES = (
    "target",
    "reached",
    "mlperf_s",
    "scored_as",
    "median_s",
    "no_eval_s",
    "epochs",
    "epochs_done",
)  # the table's columns after its keys
TITLE = (
    "time to target (s): the MLPerf score (how MLPerf ranks training times: the mean of the "
    "runs' times with the fastest and slowest run dropped, a run that missed the target "
    "counting as the slowest; two misses: not scored), and the median ± 95% CI of the runs "
    "that reached it"
)


ENERGY = ("gpu_energy_j", "cpu_energy_j")  # a run's joules: its GPUs' and its CPU packages'
# what a run cost at the study's prices (report.read.price_columns): the first that both sides have
MONEY = (
    ("usd_to_target", "to reach the target"),
    ("usd_per_million_samples", "per million samples"),
)


def column_of(rows: pd.DataFrame, column: str) -> float:
    """The median of a column over these (ok) rows, comparison's (NaN where none has it)."""
    return median(rows[column]) if column in rows.columns else math.nan


def costs(gpu: pd.DataFrame, cpu: pd.DataFrame, who: str = "CPU") -> str:
    """'; using 0.33x the energy (300.0 vs 900.0 J a run) and 1.80x the money per million
    samples (...) at the prices given': the `gpu` rows' medians over the `cpu` rows'; where the
    CPU's energy was not measured, that and why (its method), rather than nothing."""
    joules = [
        column_of(r.assign(j=r[list(ENERGY)].sum(axis=1, min_count=1)), "j") for r in (gpu, cpu)
    ]
    parts = []
    if all(math.isfinite(j) for j in joules):
        a, b = joules
        host = gpu["cpu_energy_j"].isna().any() and cpu["cpu_energy_j"].notna().any()
        its = ", its host CPU's not measured" if host else ""  # the sum holds the GPUs' alone
        parts.append(
            f"{a / b:.2f}x the energy ({format_number(a)} vs {format_number(b)} J a run{its})"
        )
    found = [(c, w) for c, w in MONEY if all(math.isfinite(column_of(r, c)) for r in (gpu, cpu))]
    for column, words in found[:1]:
        a, b = column_of(gpu, column), column_of(cpu, column)
        parts.append(
            f"{a / b:.2f}x the money {words} ({format_number(a)} vs {format_number(b)} USD) at "
            "the prices given"
        )
    text = f"; using {' and '.join(parts)}" if parts else ""
    why = [str(m) for m in cpu.get("cpu_energy_method", []) if str(m).startswith("none")]
    if not math.isfinite(joules[1]) and why:
        text += f"; the {who}'s energy was not measured ({why[0]})"
    return text


def olympic(times: list[float]) -> tuple[float, str]:
    """(score, how it was scored) of one cell's runs; a time of inf did not reach the target."""
    n, missed = len(times), sum(1 for t in times if not math.isfinite(t))
    if n == 0:
        return math.nan, "no runs"
    if missed > (1 if n >= 3 else 0):
        return math.nan, f"not scored: {missed} of {n} runs missed"
    kept = sorted(times)[1:-1] if n >= 3 else times  # inf sorts last: a miss is the one dropped
    how = f"mean of {len(kept)}" + (" (none dropped: < 3 runs)" if n < 3 else "")
    return float(np.mean(kept)), how


def runs(s: pd.DataFrame) -> pd.DataFrame:
    """The rows that are runs with a target (a skipped cell never ran)."""
    return s[(s["status"] != "skipped") & s["target"].notna()]


def reached_rows(r: pd.DataFrame) -> pd.Series:
    return (r["status"] == "ok") & (r["target_reached"] == 1)


@dataclass(frozen=True)
class Scored:
    """One cell's runs against the target."""

    cell: Cell  # the times of the runs that reached it
    score: float  # MLPerf's olympic score (NaN: not scored)
    how: str
    reached: int
    runs: int


def scored(r: pd.DataFrame, keys: list[Key]) -> list[Scored]:
    """Each cell of these runs scored, in natural order of its key."""
    out = []
    for key, g in r.groupby(columns(keys), sort=False, dropna=False) if keys else [((), r)]:
        key = key if isinstance(key, tuple) else (key,)
        hit = reached_rows(g)
        score, how = olympic(
            [float(t) if h else math.inf for t, h in zip(g["time_to_target_s"], hit)]
        )
        times = tuple(float(t) for t in g[hit]["time_to_target_s"])
        out.append(Scored(Cell(key, name_of(keys, key), times), score, how, int(hit.sum()), len(g)))
    return sorted(out, key=lambda x: tuple(natural(v) for v in x.cell.key))


def _target_line(x: Scored, g: pd.DataFrame) -> dict:
    hit = g[reached_rows(g)]
    spread = f" ± {format_number(x.cell.half)}" if len(x.cell.values) >= 2 else ""
    return {
        "target": format_number(float(g["target"].median())),
        "reached": f"{x.reached}/{x.runs}",
        "mlperf_s": format_number(x.score) if math.isfinite(x.score) else x.how,
        "scored_as": x.how if math.isfinite(x.score) else "",
        "median_s": format_number(x.cell.median) + spread if len(hit) else "not reached",
        "no_eval_s": format_number(float(hit["time_to_target_train_s"].median()))
        if len(hit)
        else "-",
        "epochs": _epochs(hit["epochs_to_target"]) if len(hit) else "-",
        "epochs_done": _epochs(g["epochs_done"]),
    }


def _epochs(counts: pd.Series) -> str:
    """A median count of epochs, whole where it is (3, never 3.00; a run a budget stopped
    mid-epoch did 2.59)."""
    return f"{float(counts.median()):.3g}"


def table(s: pd.DataFrame) -> pd.DataFrame | None:
    """One line per cell that had a target (its repeats pooled); None where none had one."""
    r = runs(s)
    if r.empty:
        return None
    keys = axes(r) or [HARDWARE]
    groups = dict(
        (tuple(show(v) for v in (k if isinstance(k, tuple) else (k,))), g)
        for k, g in r.groupby(columns(keys), sort=True, dropna=False)
    )
    names = heads(keys, VALUES)
    lines = [
        {**dict(zip(names, x.cell.shown)), **_target_line(x, groups[x.cell.shown])}
        for x in scored(r, keys)
    ]
    out = pd.DataFrame(lines)
    out.attrs["keys"] = names  # what a narrow terminal repeats (report.text)
    return out


def asks_quality(s: pd.DataFrame) -> bool:
    """Whether a study asked about time to quality (a time budget or a stop at the target): its
    answer belongs in the headline even where no run reached the target."""
    return any(bool(p.get("time_budget")) or bool(p.get("stop_at_target")) for p in s["params"])


def budgeted(s: pd.DataFrame) -> bool:
    """Whether a study trained under a time budget (its wall time is the budget, by design)."""
    return any(bool(p.get("time_budget")) for p in s["params"])


def reached_any(s: pd.DataFrame) -> bool:
    """Whether any run of these rows reached its target."""
    return bool(reached_rows(runs(s)).any())


def ttt_speedup(gn: pd.DataFrame, base: pd.DataFrame) -> str:
    """The scaling table's time-to-target speedup of a world against the smallest: median
    times of the runs that reached the target ("-" where either has none)."""
    a, b = base["time_to_target_s"].dropna(), gn["time_to_target_s"].dropna()
    if a.empty or b.empty:
        return "-"
    return f"{a.median() / b.median():.2f}x"


def _goal(r: pd.DataFrame) -> str:
    """'val_mse ≤ 0.000831' and, under a time budget, the budget."""
    metric = r["val_metric"].dropna().iloc[0] if r["val_metric"].notna().any() else "the metric"
    goal = f"{metric} ≤ {format_number(float(r['target'].median()))}"
    budget = r["params"].iloc[0].get("time_budget")
    return goal + (f", within a {float(budget):g} s training budget" if budget else "")


def finding(s: pd.DataFrame) -> str:
    """The score of a single cell, or which cell reached the target first and how sure that is."""
    r = runs(s)
    if r.empty:
        return "No run had a target: no time to quality to state."
    found, goal = scored(r, [k for k in axes(r) if k != HARDWARE]), _goal(r)
    if len(found) == 1:
        return _one(found[0], goal)
    ranked = sorted((x for x in found if math.isfinite(x.score)), key=lambda x: x.score)
    unscored = [x.cell.name for x in found if not math.isfinite(x.score)]
    tail = f" Not scored (too many runs missed): {', '.join(unscored)}." if unscored else ""
    if not ranked:
        return f"No cell reached the target ({goal}) often enough to be scored.{tail}"
    best, rest = ranked[0], ranked[1:]
    ties = [x for x in rest if not differs(best.cell, x.cell)]
    first = (
        f"{best.cell.name} (MLPerf score {format_number(best.score)} s, "
        f"{best.reached}/{best.runs} reached)"
    )
    if not rest:
        return f"Only {first} was scored on the target ({goal}).{tail}"
    slowest = rest[-1]
    said = contrast(best.cell, slowest.cell, unit="s", higher_is_better=False, amounts=False)
    worst = f"; slowest: {slowest.cell.name} at {format_number(slowest.score)} s, {said}"
    if not ties:
        return (
            f"First to the target ({goal}): {first}, ahead of every other cell beyond doubt"
            f"{worst}.{tail}"
        )
    named = f": {', '.join(x.cell.name for x in ties)}" if len(ties) <= 2 else ""
    return (
        f"Time to the target ({goal}): no significant difference between the lowest score, "
        f"{first}, and {len(ties)} other cell{'s' if len(ties) > 1 else ''}{named}"
        f"{worst if slowest not in ties else ''}.{tail}"
    )


def _one(x: Scored, goal: str) -> str:
    if x.reached == 0:
        return f"No run reached the target ({goal}): 0 of {x.runs}."
    score = (
        f"MLPerf score {format_number(x.score)} s ({x.how})" if math.isfinite(x.score) else x.how
    )
    return (
        f"Reached the target ({goal}) in {x.reached} of {x.runs} runs: {score}; "
        f"median {x.cell.amount('s')}."
    )


def view(s: pd.DataFrame) -> tuple[str, pd.DataFrame] | None:
    """The finding's table: the time-to-target table."""
    found = table(s)
    return (TITLE, found) if found is not None else None
