"""`stbench run --budget SECONDS`: after a study's planned rounds, one round more at a time while
a comparison cannot conclude, until every one can or what is left of the budget (wall seconds of
the whole study, its planned rounds included) cannot pay for the next round (issue 32: a noisy
machine needs more rounds, and nobody knows how many beforehand).

A round is every cell once (repeats are the study's outer loop, so a round's cells saw the same
machine and pair). Each added round is written to the manifest before it runs, so an
interrupted study resumes with `--resume DIR` like any other, and its rows join the same
runs.csv. The decision is plan.rounds'; this module only runs rounds and times them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..plan.planner import Plan, plan_resume, plan_round
from ..plan.rounds import decide
from ..store.manifest import write_manifest
from .lock import FolderLock


def until_conclusive(
    plan: Plan,
    env,
    budget_s: float,
    run: Callable[[Plan], list[dict]],
    say: Callable[[str], None],
) -> list[dict]:
    """Run the plan, then rounds while plan.rounds.decide says so; returns every row.
    run(plan) -> every row of the study, earlier rounds' too (the CLI's progress bar around
    runner.study.run_study): what decide reads, without reading runs.csv again."""
    started = time.monotonic()
    rows = run(plan)
    if not rows:
        return rows
    round_s = (time.monotonic() - started) / (1 + max(c.repeat for c in plan.cells))
    while True:
        left = budget_s - (time.monotonic() - started)
        decision = decide(plan.cells, rows, left, round_s)
        say(f"--budget: {decision.why}")
        if not decision.more:
            return rows
        with FolderLock(plan.folder):  # the manifest is the study's: no other parent writes it
            plan = plan_round(plan_resume(None, plan.folder, env), env)
            write_manifest(plan.folder, plan.manifest)
        began = time.monotonic()
        rows = run(plan)
        round_s = time.monotonic() - began
