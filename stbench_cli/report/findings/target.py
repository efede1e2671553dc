"""The finding of a study of time to quality: each cell's MLPerf score (report.ttt's olympic
rule) and which cell reached the target first, or that no difference is beyond doubt (pure)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd

from ..order import natural
from ..stats import format_number
from ..ttt import _reached, _runs, olympic
from .cells import Cell, axes, contrast, differs, name


@dataclass(frozen=True)
class Scored:
    cell: Cell  # the times of the runs that reached the target
    score: float  # MLPerf's olympic score (NaN: not scored)
    how: str
    reached: int
    runs: int


def _scored(runs: pd.DataFrame, keys: list[str]) -> list[Scored]:
    out = []
    for key, g in runs.groupby(keys, sort=False, dropna=False) if keys else [((), runs)]:
        key = key if isinstance(key, tuple) else (key,)
        hit = _reached(g)
        times = [float(t) if h else math.inf for t, h in zip(g["time_to_target_s"], hit)]
        score, how = olympic(times)
        cell = Cell(name(keys, key), tuple(float(t) for t in g[hit]["time_to_target_s"]), key)
        out.append(Scored(cell, score, how, int(hit.sum()), len(g)))
    return sorted(out, key=lambda x: tuple(natural(v) for v in x.cell.key))


def _goal(runs: pd.DataFrame) -> str:
    """'val_mse ≤ 0.000831' and, under a time budget, the budget."""
    metric = runs["val_metric"].iloc[0] if "val_metric" in runs.columns else "the metric"
    goal = f"{metric} ≤ {format_number(float(runs['target'].median()))}"
    params = runs["params"].iloc[0] if "params" in runs.columns else ""
    budget = (json.loads(params) if isinstance(params, str) and params else {}).get("time_budget")
    return goal + (f", within a {float(budget):g} s training budget" if budget else "")


def target(s: pd.DataFrame) -> str:
    """The score of a single cell, or which cell reached the target first and how sure that is."""
    runs = _runs(s)
    if runs.empty:
        return "No run had a target: no time to quality to state."
    scored = _scored(runs, [k for k in axes(runs) if k != "label"])
    goal = _goal(runs)
    if len(scored) == 1:
        return _one(scored[0], goal)
    ranked = sorted((x for x in scored if math.isfinite(x.score)), key=lambda x: x.score)
    unscored = [x.cell.name for x in scored if not math.isfinite(x.score)]
    tail = f" Not scored (too many runs missed): {', '.join(unscored)}." if unscored else ""
    if not ranked:
        return f"No cell reached the target ({goal}) often enough to be scored.{tail}"
    best, rest = ranked[0], ranked[1:]
    ties = [x for x in rest if not differs(best.cell, x.cell)]
    first = f"{best.cell.name} (MLPerf score {format_number(best.score)} s, {best.reached}/{best.runs} reached)"
    if not rest:
        return f"Only {first} was scored on the target ({goal}).{tail}"
    slowest = rest[-1]
    worst = (f"; slowest: {slowest.cell.name} at {format_number(slowest.score)} s, "
             f"{contrast(best.cell, slowest.cell, unit='s', higher_is_better=False, amounts=False)}")
    if not ties:
        return f"First to the target ({goal}): {first}, ahead of every other cell beyond doubt{worst}.{tail}"
    named = f": {', '.join(x.cell.name for x in ties)}" if len(ties) <= 2 else ""
    return (f"Time to the target ({goal}): no significant difference between the lowest score, {first}, and "
            f"{len(ties)} other cell{'s' if len(ties) > 1 else ''}{named}"
            f"{worst if slowest not in ties else ''}.{tail}")


def _one(x: Scored, goal: str) -> str:
    if x.reached == 0:
        return f"No run reached the target ({goal}): 0 of {x.runs}."
    score = f"MLPerf score {format_number(x.score)} s ({x.how})" if math.isfinite(x.score) else x.how
    return f"Reached the target ({goal}) in {x.reached} of {x.runs} runs: {score}; median {x.cell.amount('s')}."
