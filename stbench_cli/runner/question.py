"""`stbench gpu-vs-cpu`: the question's study run round after round within its budget (issue
37). plan/question.py plans the study and decides each next round; this module runs them.

The first rounds run every cell; each later round only the cells of the comparisons still open
(plan.question.decide), written to the manifest before it runs (so `--resume` finishes an
interrupted one like any study), until every size concludes or the budget, measured in the
wall seconds the study has taken, cannot pay for the next round.
"""

from __future__ import annotations

from collections.abc import Callable

from ..plan import question
from ..plan.planner import Plan
from ..store.rows import Run
from .rounds import add_rounds


def answer(
    plan: Plan,
    env,
    budget_s: float,
    run: Callable[[Plan], list[Run]],
    say: Callable[[str], None],
) -> list[Run]:
    """Run the question's planned rounds, then more while plan.question.decide asks for them
    and they fit in `budget_s` (wall seconds, the planned rounds included). Every row."""
    record = plan.manifest["question"]
    param, defaults = record["size"]["param"], record["defaults"]
    full = record.get("rounds", question.FULL_ROUNDS)

    def open_sizes(plan: Plan, rows: list[Run], left_s: float, cell_s: float):
        decision = question.decide(plan.cells, rows, param, defaults, left_s, cell_s, full)
        return f"gpu-vs-cpu: {decision.why}", frozenset(decision.cells)

    return add_rounds(plan, env, budget_s, run, say, open_sizes)
