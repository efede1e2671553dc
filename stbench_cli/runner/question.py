"""`stbench gpu-vs-cpu`: the question's study run round after round within its budget (issue
37). plan/question.py plans the study and decides each next round; this module runs them.

The first rounds run every cell; each later round only the cells of the comparisons still open
(plan.question.decide), written to the manifest before it runs (so `--resume` finishes an
interrupted one like any study), until every size concludes or the budget, measured in the
wall seconds the study has taken, cannot pay for the next round.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..plan import question
from ..plan.planner import Plan, plan_resume, plan_round
from ..store.manifest import write_manifest
from .lock import FolderLock


def answer(
    plan: Plan,
    env,
    budget_s: float,
    run: Callable[[Plan], list[dict]],
    say: Callable[[str], None],
) -> list[dict]:
    """Run the question's planned rounds, then more while plan.question.decide asks for them
    and they fit in `budget_s` (wall seconds, the planned rounds included). Every row."""
    record = plan.manifest["question"]
    param, defaults = record["size"]["param"], record["defaults"]
    started = time.monotonic()
    left = plan.remaining.cells
    rows = run(plan)
    # a cell's cost as measured here: what a round of the kept cells will take
    cell_s = (time.monotonic() - started) / max(len(left), 1)
    while True:
        left_s = budget_s - (time.monotonic() - started)
        full = record.get("rounds", question.FULL_ROUNDS)
        decision = question.decide(plan.cells, rows, param, defaults, left_s, cell_s, full)
        say(f"gpu-vs-cpu: {decision.why}")
        if not decision.cells:
            return rows
        with FolderLock(plan.folder):  # the manifest is the study's: no other parent writes it
            plan = plan_round(plan_resume(None, plan.folder, env), env, frozenset(decision.cells))
            write_manifest(plan.folder, plan.manifest)
        began = time.monotonic()
        rows = run(plan)
        cell_s = (time.monotonic() - began) / len(decision.cells)
