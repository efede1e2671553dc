"""`stbench run --budget`: rounds until a study's comparisons conclude. Pure: a study's cells and
rows in, the plan of its rounds, its open comparisons and the decision out.

Where the cells differ only in what a warm process can build or switch (the device, the batch,
the workload's parameters, threads, loader workers, precision; `windows_refused` says what
else), the study is a question of the engine's (kind "run", `run_as_windows`): every
configuration in timed windows inside warm processes, paired round by round against the first,
until each pair concludes or the budget ends (runner/engine.py). Otherwise every cell stays a
process and another round of every cell runs while `another_round` says so:

The comparisons are every cell against the first as planned (the first of each axis as given:
the CPU of `--device cpu cuda`, the smallest batch listed first, the defaults of `--set
threads=0,1`), on samples/s, or on the time to target where the study asks one. Where a
comparison stands is the questions' engine's one rule (plan.pairs.compared, paired by round: a
round's cells saw the same machine): open while its 95% interval holds 1 and does not lie within
the margin (then the two look equal, a conclusion of its own), or while it has fewer than two
rounds to pair. It needs the fewer of the rounds that would part its interval from 1 and those
that would fit it inside the margin, were the ratios' mean and spread to stay; CAP where
neither count would do at the spread seen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from ..comparison import MARGIN, by_round, measure_of
from ..contract import TrainerParams
from ..errors import StbenchError
from ..store.manifest import RUN_KIND
from ..store.rows import Run
from .pairs import CAP, FIRST_ROUNDS, STARTUP_S, auto_window, budget_floor, compared
from .spec import RunSpec

if TYPE_CHECKING:
    from .planner import Plan

# what a warm process of windows runs with and cannot change (its threads pool, its binding, its
# allocator are the process's): a cell that sets another value needs a process of its own
PROCESS_PARAMS = {
    f.name: f.default
    for f in fields(TrainerParams)
    if f.name in ("interop_threads", "bind", "allocator")
}

FIELDS = ("device", "strategy", "world_size", "nodes", "batch_size", "epochs")


@dataclass(frozen=True)
class Open:
    """A comparison that cannot conclude yet."""

    base: str  # what sets the first cell apart: 'threads=0'
    other: str
    rounds: int  # common rounds a conclusion needs (CAP: no count would conclude it)


@dataclass(frozen=True)
class Decision:
    """Whether to run another round, and the line that says why."""

    more: bool
    why: str


def windows_refused(cells: Sequence[RunSpec], launcher: str) -> str | None:
    """Why a study's cells, started by `launcher` (a Launch's kind), need a process each under
    --budget (None: they can be windows of warm processes), in words: the first reason found.
    The cells are the matrix's (spec.expand) or a plan's: it is asked before the inventory."""
    first = [c for c in cells if c.repeat == 0]
    if launcher != "local":
        return f"the {launcher} launcher starts every cell itself"
    if any(c.distributed for c in first):
        return "a torchrun world (--strategy) is a process per cell"
    if len({c.epochs for c in first}) > 1:
        return "--epochs compares whole trainings"
    for c in first:
        p = c.param_dict
        if p.get("time_budget") or p.get("stop_at_target"):
            return "a time to target needs whole trainings"
        for k, v in PROCESS_PARAMS.items():
            if k in p and p[k] != v:
                return f"{k}={p[k]} needs a process of its own"
    return None


def windows_window_s(cells: Sequence[RunSpec], budget_s: float) -> float:
    """The window a study of these cells gets as windows under `budget_s`; a budget that cannot
    measure every configuration twice is refused, one line naming the least that could (asked
    before the inventory, and again where the plan becomes a question)."""
    configs = sum(c.repeat == 0 for c in cells)
    window = auto_window(budget_s, 1, configs)
    floor = budget_floor(1, configs, window, STARTUP_S)
    if budget_s < floor:
        raise StbenchError(
            f"--budget {budget_s:g}: too small to measure {configs} cells twice in windows of "
            f"{window:g} s; give at least --budget {math.ceil(floor)}, or fewer cells"
        )
    return window


def run_as_windows(plan: Plan, budget_s: float, rounds: int = 1) -> Plan:
    """The study as a question of the engine's (kind "run"): one size (every cell), every
    configuration against the first, at least FIRST_ROUNDS paired rounds (more where --rounds
    asks), every round with the study's seed (a process builds a configuration once and
    measures it round after round). A budget that cannot measure every configuration twice is
    refused here, before anything is written."""
    window = windows_window_s(plan.cells, budget_s)
    record = {
        "kind": RUN_KIND,
        "size": {"param": "", "unit": "", "values": [""], "counts": [1]},
        "defaults": {},
        "window_s": window,
        "budget_s": budget_s,
        "rounds": max(FIRST_ROUNDS, rounds),
        "margin": MARGIN,
    }
    matrix = {**plan.manifest["matrix"], "seed_per_repeat": False}
    return replace(plan, manifest={**plan.manifest, "matrix": matrix, "question": record})


def key(spec: RunSpec) -> tuple:
    """A cell's identity over its rounds: what it runs, without its repeat and seed."""
    return (*(getattr(spec, f) for f in FIELDS), spec.params)


def differing_names(cells: list[RunSpec]) -> dict[tuple, str]:
    """Each cell by what differs between the cells: 'batch_size=256, threads=1'."""
    values = [{**{f: getattr(c, f) for f in FIELDS}, **c.param_dict} for c in cells]
    differ = [k for k in values[0] if len({str(v.get(k)) for v in values}) > 1]
    return {
        key(c): ", ".join(f"{k}={v.get(k)}" for k in differ) or c.run_id
        for c, v in zip(cells, values)
    }


def grouped(cells: tuple[RunSpec, ...], rows: list[Run]) -> dict[tuple, list[Run]]:
    """The rows of each cell over its rounds."""
    spec = {c.run_id: c for c in cells}
    out: dict[tuple, list[Run]] = {}
    for r in rows:
        if r.run_id in spec:
            out.setdefault(key(spec[r.run_id]), []).append(r)
    return out


def open_comparisons(cells: tuple[RunSpec, ...], rows: list[Run]) -> list[Open]:
    """The comparisons of the cells with the first that cannot conclude yet (none with fewer
    than two cells that ran: nothing to compare)."""
    first = [c for c in cells if c.repeat == 0]
    column = measure_of(rows)  # comparison's one rule: time to target where asked, samples/s
    values = {k: v for k, group in grouped(cells, rows).items() if (v := by_round(group, column))}
    said = differing_names(first)
    found = [key(c) for c in first if key(c) in values]
    if len(found) < 2:
        return []
    base, out = found[0], []
    for other in found[1:]:
        c = compared("", said[base], said[other], values[base], values[other], column)
        if not c.concluded:
            out.append(Open(c.base, c.other, min(c.to_differ or 2, c.to_equal)))
    return out


def another_round(cells: tuple[RunSpec, ...], rows: list[Run], left_s: float, round_s: float):
    """Another round while a comparison that rounds can conclude is open and a round (as long
    as the last) fits in the seconds left of the budget."""
    have = 1 + max(c.repeat for c in cells)
    found = open_comparisons(cells, rows)
    if not found:
        return Decision(False, f"every comparison with the first cell concluded in {have} rounds")
    hopeful = [o for o in found if o.rounds < CAP]
    if not hopeful:
        return Decision(
            False,
            f"after {have} rounds {', '.join(o.other for o in found)} cannot be told from "
            f"{found[0].base}, nor said to be within {1 - MARGIN:.2f}-{1 + MARGIN:.2f}x of it, "
            f"at the spread seen ({CAP} rounds would not conclude); stopping",
        )
    worst = max(hopeful, key=lambda o: o.rounds)
    needs = f"{worst.other} against {worst.base} needs ≥ {worst.rounds} rounds, {have} ran"
    if round_s > left_s:
        return Decision(
            False,
            f"{needs}; the budget has {max(left_s, 0):.0f} s left and a round takes "
            f"{round_s:.0f} s: stopping (resume with a larger --budget)",
        )
    return Decision(True, f"{needs}: one round more (~{round_s:.0f} s, {left_s:.0f} s left)")
