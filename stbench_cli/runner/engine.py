"""`stbench gpu-vs-cpu`, each windowed step of `stbench tune` and `stbench run --budget` where its
cells can be windows (plan/rounds.py), run by the questions' engine:
paired rounds of windows inside warm processes, within the budget. plan/gpu_vs_cpu.py says what
each size measures and which pairs its answer judges, plan/pairs.py where each pair stands and
what runs next, runner/windows.py runs one process; this module is the loop.

1. **First rounds, size after size, smallest first.** Each size's configurations run
   FIRST_ROUNDS rounds, spread over PROCESSES warm processes (one process understates the
   variance: pyperf's workers), each round in a rotated order; a size's later first rounds
   share their process with the next size's first ones, so n sizes take n + 1 processes, not 2n.
   A size runs only where its predicted cost (the largest size measured, grown by the size's
   count) fits what is left of the budget once the open pairs of the sizes before have what
   could conclude them (pairs.owed_s); a size that does not, and every larger one, is named
   with the budget that would measure it.
2. **Then rounds only where a pair is open**: plan.pairs.decide, until every pair has
   concluded (apart, or equal within the margin), or the rounds that could conclude the rest
   cost more than the time left, which it says, with the figures.

Every round's cells are added to the manifest before they run, so `--resume` finishes an
interrupted study; windows a process never reached (the deadline, a crash) leave the manifest
again, and what stopped the engine is kept in the manifest's question (`stopped`, `left_out`),
for the answer to say.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..comparison import interval_text
from ..contract.params import setting
from ..plan import gpu_vs_cpu, pairs
from ..plan.planner import Plan, plan_rounds
from ..plan.rounds import differing_names
from ..plan.rounds import key as cell_key
from ..plan.spec import RunSpec
from ..store import host
from ..store.files import write_cell
from ..store.machine import EnvInfo
from ..store.manifest import CONCLUDED, LEVER_KIND, RUN_KIND, write_manifest
from ..store.rows import Run, RunRow, run_of
from .lock import FolderLock
from .study import identity, machine
from .windows import run_process

# where no pair has ok windows on both sides (one configuration ran, or none)
NOTHING_PAIRED = "no pair to judge: fewer than two configurations have ok windows"


@dataclass(frozen=True)
class Segment:
    """Rounds of a size's configurations (first-round run ids) that one process runs."""

    size: str
    configs: tuple[str, ...]
    rounds: int


def answer(
    plan: Plan,
    env: EnvInfo,
    deadline: float,
    say: Callable[[str], None],
    on_row: Callable[[RunSpec, Run], None] = lambda spec, row: None,
    first: Callable[[Path, dict], None] | None = None,
) -> list[Run]:
    """Run the question's rounds until `deadline` (time.time(): the command's start plus its
    budget, so that planning counts too); every row of the study. `first`: what the question
    measures before its windows, in the study's folder (gpu-vs-cpu's anatomy of a step): inside
    the budget, and never beside a window it would slow."""
    with FolderLock(plan.folder):
        rows = Engine(plan, env, deadline, say, on_row, first).run()
        # the processes' jobs and row files: every row is in runs.csv now, every log in logs/
        shutil.rmtree(plan.folder / ".windows", ignore_errors=True)
        return rows


class Engine:
    """The loop's state: the study as planned so far, its rows, each size's measured cost."""

    def __init__(self, plan: Plan, env: EnvInfo, deadline: float, say, on_row, first=None):
        self.plan, self.env, self.say, self.on_row = plan, env, say, on_row
        self.first = first  # what the question measures before its windows (answer's `first`)
        self.end = deadline
        record = plan.manifest["question"]
        self.record = record
        self.param, self.defaults = record["size"]["param"], record["defaults"]
        self.window_s = float(record["window_s"])
        self.first_rounds = int(record.get("rounds", pairs.FIRST_ROUNDS))
        self.unit = record["size"]["unit"]
        self.who = {LEVER_KIND: "tune", RUN_KIND: "run"}.get(record.get("kind"), "gpu-vs-cpu")
        # what the deadline is the end of, in words: a tune step runs on its share of the tune's
        self.budget = "this step's share of the budget" if self.who == "tune" else "the budget"
        self.counts = dict(zip(record["size"]["values"], record["size"]["counts"]))
        self.rows: list[Run] = list(plan.done)
        self.costs: dict[str, pairs.Cost] = {}
        # processes are numbered on from an interrupted run's (each has its log: windows-N.log)
        self.processes = len(list((plan.folder / "logs").glob("windows-*.log")))
        self.stopped: list[str] = []
        # what an interrupted run said of its sizes and levers (their cells left the study)
        self.left_out: list[dict] = list(record.get("left_out") or [])
        self.outgrown: list[dict] = list(record.get("outgrown") or [])
        self.unpaid: list[dict] = list(record.get("unpaid") or [])

    # -- the study's sizes and configurations ---------------------------------------------
    def size_of(self, spec: RunSpec) -> str:
        return gpu_vs_cpu.size_of(spec, self.param)

    def describe(self, size: str) -> str:
        if not self.param:  # `run --budget`: the study's cells are one size
            return "the study's cells"
        return f"{self.counts.get(size, 0):,.0f} {self.unit}".strip()

    def firsts(self, size: str) -> list[RunSpec]:
        """The size's configurations (first-round cells) that can still run: not skipped, no
        failed window (a configuration that ran out of memory is its rows; the others go on)."""
        bad = {r.run_id for r in self.rows if r.status != "ok"}
        first_of = gpu_vs_cpu.first_rounds(self.plan.cells)
        broken = {first_of[x] for x in bad if x in first_of}
        return [
            c
            for c in self.plan.cells
            if c.repeat == 0
            and self.size_of(c) == size
            and c.run_id not in self.plan.skips
            and c.run_id not in broken
        ]

    def rounds_of(self, configs: tuple[str, ...]) -> set[int]:
        """The rounds in which any of these configurations (first-round run ids) has a row."""
        first_of = gpu_vs_cpu.first_rounds(self.plan.cells)
        repeat = {c.run_id: c.repeat for c in self.plan.cells}
        return {repeat[r.run_id] for r in self.rows if first_of.get(r.run_id) in configs}

    def rounds_at(self, size: str) -> set[int]:
        """The rounds measured at a size (a skipped configuration's row is none)."""
        ids = {c.run_id: c.repeat for c in self.plan.cells if self.size_of(c) == size}
        return {ids[r.run_id] for r in self.rows if r.run_id in ids and r.status != "skipped"}

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> list[Run]:
        self._start()
        if self.first is not None:
            self.first(self.plan.folder, self.plan.manifest)
        sizes = list(self.record["size"]["values"])
        later: Segment | None = (
            None  # a size's later first rounds: the next size's process runs them
        )
        for i, size in enumerate(sizes):
            self._outgrow_before(sizes, i)
            self._leave_compile(sizes[i:], later)
            first = self._first_half(size, later)
            if first is False and later is not None:
                # the size before's later rounds first: with them run, its levers are judged
                # on all its first rounds (one that only loses leaves this size, and with it
                # a third of a round) and what is left is known, not predicted. Left out while
                # they were still to run, stnn's 100,000 pairs at --budget 300 was named with
                # --budget 351 and the study ended at 120 s
                if self._fits([later]):
                    self._process([later])
                later = None
                self._outgrow_before(sizes, i)
                self._leave_compile(sizes[i:], None)
                first = self._first_half(size, None)
            if first is False:
                self._leave_out(sizes[i:], later)
                break
            self._process([s for s in (later, first) if s])
            later = self._second_half(size)
        if later is not None and self._fits([later]):
            self._process([later])
        while True:
            found = gpu_vs_cpu.judged(self.record, self.plan.cells, self.rows)
            decision = pairs.decide(found, self.costs, self._left(), self.describe, self.budget)
            if not decision.runs:
                self.stopped = list(decision.why) or ([CONCLUDED] if found else [NOTHING_PAIRED])
                break
            for more in decision.runs:
                self._process([Segment(more.size, more.configs, more.rounds)])
        for why in self.stopped:  # a tune's step says only what left it open
            if why == CONCLUDED:
                why = {"tune": "", "run": "every pair with the first cell concluded"}.get(
                    self.who, why
                )
            if why:
                self.say(f"{self.who}: {why}")
        self._keep_record()
        return self.rows

    def _left(self) -> float:
        return self.end - time.time()

    def _start(self) -> None:
        """The manifest, for a new study."""
        if not (self.plan.folder / "manifest.json").exists():
            write_manifest(self.plan.folder, self.plan.manifest)

    def _skipped(self, size: str) -> None:
        """A skipped row for each configuration of a size measured that cannot run here (a GPU
        it does not fit): the answer names it."""
        done = {r.run_id for r in self.rows}
        for spec in self.plan.cells:
            if self.size_of(spec) == size and spec.run_id in self.plan.skips:
                if spec.run_id not in done:
                    reason = self.plan.skips[spec.run_id]
                    self._write(spec, RunRow(identity(spec), "skipped", reason, machine(self.env)))

    def _write(self, spec: RunSpec, row: RunRow) -> None:
        write_cell(self.plan.folder, row, [], [])
        self.rows.append(run_of(row.record(), str(self.plan.folder)))
        self.on_row(spec, self.rows[-1])

    def _first_half(self, size: str, later: Segment | None) -> Segment | None | bool:
        """The first of a size's first rounds (the rest run in the next process): as many a
        process as fit with two processes' worth (and the size before's later rounds) in what is
        left of the budget; None where nothing is left to run, False where two rounds do not
        fit (the size is left out)."""
        have = len(self.rounds_at(size))
        configs = tuple(c.run_id for c in self.firsts(size))
        if not configs:  # nothing of it can run here: its skipped rows say why
            self._skipped(size)
            return None
        if have >= self.first_rounds:
            self._measure(size)
            return None
        per = -(-(self.first_rounds - have) // pairs.PROCESSES)
        cost = self._predicted(size, list(configs))
        if cost is not None:
            left = self._left() - (self._cost_s(later) or 0.0)
            left -= self._owed(left, later)  # the smaller sizes' open pairs conclude first
            while per > 1 and pairs.PROCESSES * cost.process_s(per) > left:
                per -= 1
            if pairs.PROCESSES * cost.process_s(per) > left:
                return False
        self._skipped(size)
        return Segment(size, configs, per)

    def _second_half(self, size: str) -> Segment | None:
        """The rest of a size's first rounds, as many as its first process's cost says fit."""
        missing = self.first_rounds - len(self.rounds_at(size))
        configs = tuple(c.run_id for c in self.firsts(size))  # less any that failed
        if missing <= 0 or not configs or not self.rounds_at(size):
            return None
        rounds = min(missing, -(-self.first_rounds // pairs.PROCESSES))
        known = self.costs.get(size)
        while known is not None and rounds > 1 and known.process_s(rounds, configs) > self._left():
            rounds -= 1
        return Segment(size, configs, rounds)

    def _owed(self, left_s: float, later: Segment | None = None) -> float:
        """What the open pairs of the sizes measured so far need to conclude beyond the size
        before's `later` first rounds, as far as it fits in `left_s` (pairs.owed_s): a larger
        size's first rounds leave it to them."""
        found = gpu_vs_cpu.judged(self.record, self.plan.cells, self.rows)
        coming = {later.size: later.rounds} if later else {}
        return pairs.owed_s(found, self.costs, left_s, coming)

    def _cost_s(self, segment: Segment | None) -> float | None:
        """What a segment costs as a process of its own (None: nothing known of its size)."""
        if segment is None:
            return None
        known = self.costs.get(segment.size) or self._predicted(segment.size, segment.configs)
        return known.process_s(segment.rounds, segment.configs) if known else None

    def _fits(self, segments: list[Segment]) -> bool:
        """Whether a process of these segments ends within the budget, said where not."""
        cost = sum(self._cost_s(s) or 0.0 for s in segments)
        if cost <= self._left():
            return True
        sizes = ", ".join(self.describe(s.size) for s in segments)
        self.say(
            f"{sizes}: a process of its later rounds would take ~{cost:.0f} s; "
            f"{max(self._left(), 0):.0f} s of the budget left"
        )
        return False

    def _predicted(self, size: str, configs: list[str]) -> pairs.Cost | None:
        """The size's cost from the largest size measured before it, its steps grown as they
        grew from the size before that (pairs.step_growth; None: nothing measured yet)."""
        if not self.costs:
            return None
        measured = sorted(self.costs.values(), key=lambda c: c.count)
        known = measured[-1]
        prior = {self.config_key(c): c for c in known.window_s}
        mapping = {c: prior.get(self.config_key(c), next(iter(prior))) for c in configs}
        growth = 1.0
        if len(measured) > 1:
            before = {self.config_key(c): s for c, s in measured[-2].step_s.items()}
            steps = [
                (before[self.config_key(c)], s)
                for c, s in known.step_s.items()
                if self.config_key(c) in before
            ]
            growth = pairs.step_growth(steps, known.count / measured[-2].count)
        return pairs.predicted(known, size, self.counts[size], self.window_s, mapping, growth)

    def config_key(self, run_id: str) -> str:
        """What a configuration is apart from its size: its device and its levers."""
        spec = next(c for c in self.plan.cells if c.run_id == run_id)
        levers = {k: spec.param_dict.get(k) for k in gpu_vs_cpu.CPU_LEVERS + ("compile",)}
        return f"{spec.device} {sorted(levers.items())}"

    def _leave_out(self, sizes: list[str], later: Segment | None = None) -> None:
        """Sizes the budget cannot measure twice: each named with the budget it would need (the
        size before's later first rounds, still to run, and what the open pairs of the sizes
        before need to conclude, counted in)."""
        extra = self._cost_s(later) or 0.0
        extra += self._owed(self._left() - extra, later)  # what the sizes before still need
        kept = {x["size"] for x in self.left_out}  # an interrupted run's: their cells are gone
        unrunnable = set()
        for size in sizes:
            if size in kept:
                continue
            configs = [c.run_id for c in self.firsts(size)]
            if not configs:  # no budget would measure it here: its skipped rows say why
                self._skipped(size)
                unrunnable.add(size)
                continue
            cost = self._predicted(size, configs)
            if cost is None:
                self.left_out.append({"size": size, "needs_s": None})
                continue
            extra += pairs.PROCESSES * cost.process_s(1)  # two rounds, one a process
            spent = self.record["budget_s"] - self._left()
            self.left_out.append({"size": size, "needs_s": math.ceil(spent + extra)})
        self._keep_record()  # before the cells go: a resumed study learns it from the record
        named = ", ".join(
            f"{self.describe(x['size'])} (--budget {x['needs_s']})"
            if x["needs_s"]
            else self.describe(x["size"])
            for x in self.left_out
        )
        if named:
            self.say(f"{self.who}: not measured, the budget cannot pay for two rounds: {named}")
        left = set(sizes) - unrunnable
        self._drop({c.run_id for c in self.plan.cells if self.size_of(c) in left})

    def _outgrow_before(self, sizes: list[str], i: int) -> None:
        """Before a question's size `i`, from its third on: the levers the two sizes before it
        showed outgrown leave it and every larger one (`_outgrow`)."""
        if i >= 2 and self.who == "gpu-vs-cpu":
            self._outgrow(sizes[i - 2 : i], sizes[i:])

    def _outgrow(self, last_two: list[str], larger: list[str]) -> None:
        """The CPU levers that only take resources away and lost to the defaults at the last two
        sizes, more at the larger, leave every larger size (plan/gpu_vs_cpu.outgrown): said
        now, and kept in the manifest's question for the answer."""
        found = gpu_vs_cpu.outgrown(
            self.plan.cells,
            self.rows,
            self.param,
            last_two,
            self.defaults,
            host.physical_cores(),
        )
        gone: set[str] = set()
        for lever in found:
            config = self.config_key(lever.seen[-1].other)  # the lever's cell, apart from size
            gone |= self._cells_of({config}, larger)
            words = " ".join(setting(k, v) for k, v in lever.sets)
            seen = [[x.size, x.ratio, x.low, x.high] for x in lever.seen]
            # found again (a resumed study, or once more after the size before's later rounds):
            # its latest rows replace what was kept, said once
            said = [x for x in self.outgrown if (x["sets"], x["from"]) == (words, larger[0])]
            self.outgrown = [x for x in self.outgrown if x not in said]
            self.outgrown.append({"sets": words, "from": larger[0], "seen": seen})
            if said:
                continue
            (before, last) = lever.seen
            self.say(
                f"{self.who}: cpu {words} not measured from {self.describe(larger[0])} on: "
                f"{before.ratio:.2f}x ({interval_text(before.low, before.high)}) the defaults' "
                f"samples/s at {self.describe(before.size)}, {last.ratio:.2f}x "
                f"({interval_text(last.low, last.high)}) at {self.describe(last.size)}: it loses "
                "more as the work grows"
            )
        if gone:
            self._drop(gone)
            self._keep_record()

    def _compiled(self, size: str) -> set[str]:
        """The size's configurations (first-round run ids) that compile."""
        return {
            c.run_id
            for c in self.plan.cells
            if c.repeat == 0
            and self.size_of(c) == size
            and c.param_dict.get("compile", "none") != "none"
        }

    def _leave_compile(self, sizes: list[str], later: Segment | None) -> None:
        """Before a size (`sizes[0]`, the larger after it): the compiled configurations leave it
        and every larger one where their compilations, paid in each of its processes, are what
        keeps its first rounds from fitting what is left of the budget (without them they fit):
        the size is measured at its other configurations rather than left out. Said now, and
        kept in the manifest's question for the answer."""
        size = sizes[0]
        configs = [c.run_id for c in self.firsts(size)]
        cost = self._predicted(size, configs)
        if cost is None or not cost.build_s:
            return
        left = self._left() - (self._cost_s(later) or 0.0)
        cheap = [c for c in configs if c not in cost.build_s]
        if pairs.PROCESSES * cost.process_s(1, configs) <= left:
            return
        if not cheap or pairs.PROCESSES * cost.process_s(1, cheap) > left:
            return  # the size does not fit without them either: it is left out
        gone = self._cells_of({self.config_key(c) for c in cost.build_s}, sizes)
        build = max(cost.build_s.values())
        for run_id in sorted(cost.build_s):
            words = " ".join(self._moved(run_id))
            self.unpaid.append({"sets": words, "from": size, "build_s": round(build, 1)})
            self.say(
                f"{self.who}: {self.label(run_id)} not measured from {self.describe(size)} on: "
                f"a compilation takes ~{build:.0f} s in each of its processes; "
                f"{max(left, 0):.0f} s of the budget left"
            )
        self._drop(gone)
        self._keep_record()

    def _cells_of(self, configs: set[str], sizes: list[str]) -> set[str]:
        """The run ids of these configurations (`config_key`s) at these sizes, every round."""
        return {
            c.run_id
            for c in self.plan.cells
            if self.size_of(c) in sizes and self.config_key(c.run_id) in configs
        }

    def _drop(self, gone: set[str]) -> None:
        """Cells that will not run (a size left out, windows a process never reached) leave the
        study: the manifest holds what ran and what is still to run, nothing else."""
        kept = tuple(c for c in self.plan.cells if c.run_id not in gone)
        manifest = {
            **self.plan.manifest,
            "cells": [c for c in self.plan.manifest["cells"] if c["run_id"] not in gone],
        }
        self.plan = replace(self.plan, cells=kept, manifest=manifest)
        write_manifest(self.plan.folder, manifest)

    def _process(self, segments: list[Segment]) -> None:
        """One warm process: each segment's new rounds of its configurations at its size, each
        round rotated, segment after segment."""
        if not segments:
            return
        windows, said = [], []
        done = {r.run_id for r in self.rows}
        for seg in segments:
            ran = self.rounds_of(seg.configs)
            top = max(ran, default=-1) + 1 + seg.rounds
            repeats = [r for r in range(top) if r not in ran][: seg.rounds]
            self.plan = plan_rounds(self.plan, self.env, seg.configs, repeats)
            first = {c.run_id: c for c in self.plan.cells if c.repeat == 0}
            by = {(c.params, c.device, c.batch_size, c.repeat): c for c in self.plan.cells}

            def cell(config: str, r: int) -> RunSpec | None:
                f = first[config]
                return by.get((f.params, f.device, f.batch_size, r))

            # a round an interrupted process left part-way (the window it was in when stopped
            # is in the manifest with no row): its missing windows run first, none lost
            unfinished = [
                r
                for r in sorted(ran)
                if any((c := cell(f, r)) and c.run_id not in done for f in seg.configs)
            ]
            windows += [
                c
                for r in unfinished + repeats
                for f in pairs.rotated(list(seg.configs), r)
                if (c := cell(f, r)) and c.run_id not in done
            ]
            names = "; ".join(self.label(c) for c in seg.configs)
            span = f"{repeats[0] + 1}-{repeats[-1] + 1}" if len(repeats) > 1 else repeats[0] + 1
            said.append(
                f"{self.describe(seg.size)}: round{'s' * (len(repeats) > 1)} {span} of {names}"
            )
        write_manifest(self.plan.folder, self.plan.manifest)
        self.processes += 1
        for line in said:
            self.say(f"process {self.processes}, {line}")
        ran = self._run(windows)
        if ran.refork:  # CUDA could not start after the fork: warm forks are off, a fresh one
            self.processes += 1
            ran = self._run(list(ran.unrun))
        if ran.broke:
            self.say(f"process {self.processes} ended early ({ran.broke})")
        if ran.unrun:  # never reached: out of the study again (a configuration's first stays)
            self._drop({w.run_id for w in ran.unrun if w.repeat > 0})
        for i, seg in enumerate(segments):  # the process's start is its first segment's
            self._measure(seg.size, ran.startup_s if i == 0 else None)

    def _run(self, windows: list[RunSpec]):
        ran = run_process(
            self.plan.folder,
            self.env,
            windows,
            self.window_s,
            pairs.MIN_STEPS,
            self.end,
            f"windows-{self.processes}",
            self.on_row,
            self._build_guess(),
        )
        self.rows += ran.rows
        return ran

    def _build_guess(self) -> float:
        """What a compiled configuration's first window in a process runs untimed, as a
        process's window checks whether it ends in time: the most measured so far, else
        nothing. Not the prior: at 40 s it kept a tune's compile step from a compilation that
        took 12 s (inductor's cache on disk warm), and a first compilation that overruns the
        deadline is ended GRACE_S past it (runner/windows.py)."""
        built = [v for cost in self.costs.values() for v in cost.build_s.values()]
        return max(built, default=0.0)

    def label(self, run_id: str) -> str:
        """A configuration in words: its device and what it sets apart from the defaults."""
        spec = next(c for c in self.plan.cells if c.run_id == run_id)
        if self.who == "run":  # what sets the cell apart from the study's others
            return differing_names([c for c in self.plan.cells if c.repeat == 0])[cell_key(spec)]
        return f"{spec.device} {' '.join(self._moved(run_id)) or 'defaults'}"

    def _moved(self, run_id: str) -> list[str]:
        """What a question's configuration sets apart from the CPU's defaults, in words."""
        p = next(c for c in self.plan.cells if c.run_id == run_id).param_dict
        moved = [
            setting(k, p.get(k)) for k in gpu_vs_cpu.CPU_LEVERS if p.get(k) != self.defaults.get(k)
        ]
        return moved + ([f"compile={p['compile']}"] if p.get("compile", "none") != "none" else [])

    def _measure(self, size: str, startup_s: float | None = None) -> None:
        """The size's cost from its ok windows so far (a process's start: the mean seen)."""
        first_of = gpu_vs_cpu.first_rounds(self.plan.cells)
        ids = {c.run_id for c in self.plan.cells if self.size_of(c) == size}
        windows = [
            pairs.Window(
                first_of[r.run_id],
                r.wall_s,
                r.setup_s or 0.0,
                r.train_s / r.steps_done,
            )
            for r in self.rows
            if r.run_id in ids and r.status == "ok" and r.steps_done
        ]
        if not windows:
            return
        known = self.costs.get(size)
        if startup_s is None:
            startup_s = known.startup_s if known else 1.0
        elif known is not None:
            startup_s = (startup_s + known.startup_s) / 2
        self.costs[size] = pairs.cost_of_windows(
            size, self.counts[size], windows, startup_s, self._compiled(size)
        )

    def _keep_record(self) -> None:
        """What stopped the engine, in the manifest's question, for the answer to say."""
        record = {**self.plan.manifest["question"], "stopped": self.stopped}
        if self.left_out:
            record["left_out"] = self.left_out
        if self.outgrown:
            record["outgrown"] = self.outgrown
        if self.unpaid:
            record["unpaid"] = self.unpaid
        manifest = {**self.plan.manifest, "question": record}
        self.plan = replace(self.plan, manifest=manifest)
        write_manifest(self.plan.folder, manifest)
