"""Rounds added to a study while its comparisons cannot conclude: `stbench run --budget SECONDS`
(every cell again: a noisy machine needs more rounds, and nobody knows how many
beforehand) and `stbench gpu-vs-cpu` (the cells of the sizes still open). What to add is
the planner's decision (plan.rounds.another_round, plan.pairs.decide); this module runs the rounds
and times them, within the budget: wall seconds of the whole study, its planned rounds included.

A round is every cell once (repeats are the study's outer loop, so a round's cells saw the same
machine and pair). Each added round is written to the manifest before it runs, so an
interrupted study resumes with `--resume DIR` like any other, and its rows join the same
runs.csv.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..plan.planner import Plan, plan_resume, plan_round
from ..plan.rounds import another_round
from ..store.manifest import write_manifest
from ..store.rows import Run
from .lock import FolderLock

# (the study now, every row, seconds left, seconds a cell takes) -> (why, the first round's run
# ids to run again: None for every one, empty to stop)
Next = Callable[[Plan, list[Run], float, float], tuple[str, frozenset[str] | None]]


def add_rounds(
    plan: Plan,
    env,
    budget_s: float,
    run: Callable[[Plan], list[Run]],
    say: Callable[[str], None],
    next_round: Next,
) -> list[Run]:
    """Run the plan, then the rounds next_round asks for while it asks; returns every row.
    run(plan) -> every row of the study, earlier rounds' too (the CLI's progress bar around
    runner.study.run_study): what the decision reads, without reading runs.csv again."""
    started = time.monotonic()
    count = len(plan.remaining.cells)
    rows = run(plan)
    if not rows:
        return rows
    # a cell's cost as measured here: what the next round of its cells will take
    cell_s = (time.monotonic() - started) / max(count, 1)
    while True:
        why, cells = next_round(plan, rows, budget_s - (time.monotonic() - started), cell_s)
        say(why)
        if cells is not None and not cells:
            return rows
        with FolderLock(plan.folder):  # the manifest is the study's: no other parent writes it
            plan = plan_round(plan_resume(None, plan.folder, env), env, cells)
            write_manifest(plan.folder, plan.manifest)
        began, count = time.monotonic(), len(plan.remaining.cells)
        rows = run(plan)
        cell_s = (time.monotonic() - began) / max(count, 1)


def until_conclusive(
    plan: Plan,
    env,
    budget_s: float,
    run: Callable[[Plan], list[Run]],
    say: Callable[[str], None],
) -> list[Run]:
    """`stbench run --budget`: a round of every cell more while plan.rounds.another_round says
    so."""

    def every_cell(plan: Plan, rows: list[Run], left_s: float, cell_s: float):
        per_round = len(plan.cells) / (1 + max(c.repeat for c in plan.cells))
        decision = another_round(plan.cells, rows, left_s, cell_s * per_round)
        return f"--budget: {decision.why}", None if decision.more else frozenset()

    return add_rounds(plan, env, budget_s, run, say, every_cell)
