"""`stbench tune`: the CPU at its best. Coordinate descent over the levers
(plan/levers.py), one normal study per step in one folder, each judged round by round
(plan/judge.py); then torch's defaults against the best configuration, side by side.

Everything is derived from the step folders' rows: running the search again over the same
folder (`--resume`) replays every decision and runs only what is missing, so an interrupted
tune continues where it stopped, and a larger --budget searches the levers it left out.
tune.json holds the request and the result (the best configuration, its gain over torch's
defaults with a 95% interval, the options that reproduce it); tune.csv one line per value tried.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from ..comparison import ALL_STEPS, QUALITY, SPEED, SPS, TTT, by_round, column_median, measure_of
from ..comparison import judge as compare
from ..errors import StbenchError
from ..plan import levers, pairs, registry
from ..plan.judge import judge_step, value_of
from ..plan.levers import BATCH, HostOffer
from ..plan.planner import Plan, plan_resume, plan_round, resolve_params
from ..plan.spec import WINDOWED_LEVERS, RunSpec
from ..plan.tuning import (
    CONFIRM,
    TUNE_FILE,
    TuneSpec,
    first_rounds_s,
    plan_confirm,
    plan_step,
    plan_window_step,
    reproduce,
    searched,
    step_folder,
    step_share_s,
    step_window_s,
    windowed,
)
from ..store import host
from ..store.files import atomic_write, read_runs
from ..store.machine import EnvInfo
from ..store.manifest import write_manifest
from ..store.rows import Run
from .engine import answer
from .lock import FolderLock
from .tune_files import result_csv, step_record

CELL_OVERHEAD_S = 1.5  # a cell's cost beyond its rows' wall and set-up: load check, writes
MORE_ROUNDS = 4  # rounds a step may add for a value that looks better (within the budget)


def lever_value(spec: RunSpec, lever: str) -> object:
    return spec.batch_size if lever == BATCH else spec.param_dict.get(lever)


def looks_better(lever, rows: list[Run], reference, verdicts) -> object | None:
    """The value that looks better than the reference without being judged so (its per-round
    ratio above 1, its interval holding 1, a count of rounds able to tell): the one more rounds
    are for; None where no value is (a step kept its value, or none can be told apart)."""
    if any(v.better and not v.note and v.subject != reference for v in verdicts):
        return None  # one is judged better already: the step keeps it
    found = [
        v
        for v in verdicts
        if v.subject != reference
        and v.ratio is not None
        and v.ratio > 1
        and not v.significant
        and not v.note
        and v.needs < pairs.CAP
    ]
    return max(found, key=lambda v: v.ratio).subject if found else None


def offer(env: EnvInfo) -> HostOffer:
    return HostOffer(
        host.physical_cores(),
        env.cores_logical or 1,
        env.threads or 1,
        tuple(host.allocators()),
        host.binding(),
        host.numa_nodes(),
    )


def starting_point(spec: TuneSpec, hosted: HostOffer) -> dict[str, object]:
    """torch's defaults for every lever, the user's --set values for the levers it fixes."""
    w = registry.get(spec.workload)
    _, _, engine = resolve_params(w, spec.preset or w.default_preset, spec.smoke, ())
    batch = spec.batch_size or int(engine.get("batch_size", 64))
    start = levers.baseline(hosted, batch)
    for key, text in spec.fixed.items():
        if key in start:
            try:
                start[key] = w.all_params[key].parse(text)
            except ValueError as exc:
                raise StbenchError(f"--set {exc}") from None
    return start


def _rows(folder: Path) -> list[Run] | None:
    """The step's rows when every cell of its manifest has one, else None."""
    try:
        rows, cells = read_runs(folder), json.loads((folder / "manifest.json").read_text())["cells"]
    except (StbenchError, OSError, ValueError, KeyError):
        return None
    return rows if len(rows) >= len(cells) else None


def _same_step(folder: Path, make) -> None:
    """A step folder must hold the step the search reaches now: its cells planned from the best
    configuration so far. Rows judged by other rules (an older stbench) or a folder edited by
    hand may lead elsewhere; then this one line says so instead of judging the wrong cells."""
    try:
        stored = {
            RunSpec.from_dict(c).run_id
            for c in json.loads((folder / "manifest.json").read_text())["cells"]
        }
    except (OSError, ValueError, KeyError, TypeError):
        return  # no study there yet
    planned = {c.run_id for c in make().cells}
    if not planned <= stored:  # rounds added for a value that looked better are the step's
        raise StbenchError(
            f"{folder} holds a step planned from another configuration than the "
            "search reaches now (its rows were judged differently before); move "
            "it away and resume to run that step again"
        )


def spent_s(root: Path) -> tuple[float, list[float]]:
    """Seconds the tune's steps have cost so far, and each process cell's cost (a windowed
    step's seconds are its engine's, kept in its load.json)."""
    costs, windowed_s = [], 0.0
    for runs in sorted(root.glob("*/runs.csv")):
        if _asked(runs.parent):
            windowed_s += _seconds(runs.parent)
            continue
        for r in read_runs(runs.parent):
            costs.append(sum(r.get(k, 0.0) for k in ("wall_s", "setup_s")) + CELL_OVERHEAD_S)
    return sum(costs) + windowed_s, costs


def _asked(folder: Path) -> dict:
    """A windowed step's question (its manifest's), empty for a step of process cells."""
    try:
        return json.loads((folder / "manifest.json").read_text()).get("question") or {}
    except (OSError, ValueError):
        return {}


def _engine_stopped(folder: Path) -> list[str] | None:
    """Why a windowed step's engine stopped, None while it has not."""
    return _asked(folder).get("stopped")


def _seconds(folder: Path) -> float:
    """The seconds a windowed step ran before (an interrupted one: nothing kept, its rows')."""
    try:
        return float(json.loads((folder / "load.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        rows = read_runs(folder) if (folder / "runs.csv").exists() else []
        return sum(r.get(k, 0.0) or 0.0 for r in rows for k in ("wall_s", "setup_s"))


def estimate_s(spec: TuneSpec, cells: int, costs: list[float], starts: list[float]) -> float:
    """What `cells` process cells cost: the median of those run so far (`costs`); before any,
    a cell's training and a quarter more (its evaluations), the start of the windowed steps'
    processes (`starts`: their first windows' set-up; none yet, 2 x pairs.STARTUP_S) and
    CELL_OVERHEAD_S. The guess before, 2 x cell_s + 10 s, priced cnn-strain's inter-op step
    (9 cells) at 234 s on the 2-vCPU VM; it took 131 s, 14.6 s a cell (15 s priced now)."""
    if costs:
        return cells * statistics.median(costs)
    start = statistics.median(starts) if starts else 2 * pairs.STARTUP_S
    return cells * (1.25 * spec.cell_s + start + CELL_OVERHEAD_S)


def process_starts(root: Path) -> list[float]:
    """The set-up before each windowed step's processes' first windows: a process's start (the
    fork, the workload's data and model, the warm-up), as a process cell pays it too."""
    starts = []
    for runs in sorted(root.glob("*/runs.csv")):
        if not _asked(runs.parent):
            continue
        first: dict[str, Run] = {}
        for r in read_runs(runs.parent):
            first.setdefault(r.get("job_id") or "", r)
        starts += [r.get("setup_s") for r in first.values() if r.get("setup_s")]
    return starts


class Tuner:
    """One tune's search over its folder; `run` runs a plan and returns every row of its study
    (the CLI's progress bar around runner.study.run_study); `watch(plan, seconds)`, a context
    that yields the engine's on_row for a windowed step (the CLI's bar over those seconds)."""

    def __init__(
        self,
        spec: TuneSpec,
        root: Path,
        env: EnvInfo,
        run: Callable[[Plan], list[Run]],
        command: tuple[str, ...] = (),
        say: Callable[[str], None] = lambda line: None,
        watch: Callable[[Plan, float], AbstractContextManager] = (
            lambda plan, seconds: nullcontext(lambda spec, row: None)
        ),
    ):
        self.spec, self.root, self.env, self.run, self.command = spec, root, env, run, command
        self.say, self.watch = say, watch
        self.host = offer(env)
        self.start = starting_point(spec, self.host)
        self.best = dict(self.start)
        self.steps: list[dict] = []
        self.stopped: str | None = None
        self.unpaid = ""  # why the last step the budget could not pay was not run

    def search(self) -> dict:
        self.root.mkdir(parents=True, exist_ok=True)
        self._save(None)
        todo = searched(self.spec)
        for index, name in enumerate(levers.NAMES, 1):
            self.steps.append(self._step(index, name, name in todo))
            self._save(None)
        result = self._confirm(len(levers.NAMES) + 1)
        self._save(result)
        return result

    def _step(self, index: int, name: str, open_: bool) -> dict:
        lever = levers.get(name)
        reference = self.best[name]
        base = {
            "index": index,
            "lever": name,
            "reference": reference,
            "missing": list(lever.missing(self.host)),
        }
        if not open_:
            return {**base, "note": f"fixed by --set {name}={reference}"}
        values = levers.tried(lever, self.host, int(self.start[BATCH]), reference)
        if len(values) < 2:
            return {**base, "note": "nothing else to try on this machine"}
        folder = step_folder(self.root, index, name)
        if name in WINDOWED_LEVERS:  # held side by side in a running process: the engine
            window_s = step_window_s(self.spec, len(values))
            base["window_s"] = window_s
            rows = self._windows(
                folder,
                lambda: plan_window_step(
                    self.spec, self.env, folder, self.best, name, values, self.command, window_s
                ),
                len(values),
                window_s,
                last=not any(n in searched(self.spec) for n in levers.NAMES[index:]),
            )
        else:
            rows = self._study(
                folder,
                lambda: plan_step(
                    self.spec, self.env, folder, self.best, name, values, self.command
                ),
                len(values),
                later_s=self._windowed_after_s(index),
            )
        if rows is None:
            return {**base, "values": list(values), "note": f"not searched: {self.unpaid}"}
        measure, verdicts, kept = judge_step(lever, rows, reference)
        if name in WINDOWED_LEVERS:  # the engine gave each value its rounds already
            return self._keep(
                index, name, kept, step_record(base, folder, values, measure, verdicts, kept, rows)
            )
        # A value that looks better gets rounds until it is judged, up to MORE_ROUNDS in all;
        # never once a later step ran (a replay must reach the decisions the search took).
        added = max(r.repeat for r in rows) + 1 - self.spec.repeats
        later = any(
            "." not in p.name and int(p.name[:2]) > index for p in self.root.glob("[0-9][0-9]-*")
        )
        for _ in range(0 if later else MORE_ROUNDS - added):
            hopeful = looks_better(lever, rows, reference, verdicts)
            more = self._another_round(folder, name, reference, hopeful, index) if hopeful else None
            if more is None:
                break
            rows = more
            measure, verdicts, kept = judge_step(lever, rows, reference)
        return self._keep(
            index, name, kept, step_record(base, folder, values, measure, verdicts, kept, rows)
        )

    def _keep(self, index: int, name: str, kept: object, record: dict) -> dict:
        """The step's value becomes the best so far. A step the budget made the search pass
        before (a resume with a larger --budget runs it now) may change the best the later
        steps ran from: their folders are set aside (`.superseded`) and they run again."""
        if kept != self.best[name]:
            for later in self.root.glob("[0-9][0-9]-*"):
                if "." not in later.name and int(later.name[:2]) > index:
                    later.rename(later.with_name(f"{later.name}.superseded-{time.time():.0f}"))
                    self.say(f"tune: {later.name} ran from another best; it runs again")
        self.best[name] = kept
        return record

    def _another_round(
        self, folder: Path, lever: str, reference, value, index: int
    ) -> list[Run] | None:
        """One more round of the reference and the value that looks better (as
        `run --budget` adds rounds) where the budget, less the confirming step's reserve and
        the windowed steps' after step `index`, allows it: the step's rows, or None."""
        spent, costs = spent_s(self.root)
        need = self._estimate_s(2, costs)
        reserve = self._estimate_s(2 * self.spec.repeats, costs) + self._windowed_after_s(index)
        if spent + need + reserve > self.spec.budget_s:
            return None
        plan = plan_resume(self.spec.workload, folder, self.env)
        pair = frozenset(
            c.run_id
            for c in plan.cells
            if c.repeat == 0 and lever_value(c, lever) in (reference, value)
        )
        with FolderLock(folder):
            plan = plan_round(plan, self.env, pair)
            write_manifest(folder, plan.manifest)
        return self.run(plan)  # every row of the step, this round's too

    def _study(
        self, folder: Path, make, configs: int, force: bool = False, later_s: float = 0.0
    ) -> list[Run] | None:
        """The step's rows: read back, resumed, or run anew while the budget allows, keeping
        enough for the confirming step (which runs whatever is left: `force`) and `later_s`
        for the windowed steps after it."""
        _same_step(folder, make)
        rows = _rows(folder)
        if rows is not None:
            return rows
        spent, costs = spent_s(self.root)
        done = len(read_runs(folder)) if (folder / "runs.csv").exists() else 0
        need = self._estimate_s(configs * self.spec.repeats - done, costs)
        reserve = 0 if force else self._reserve_s(costs) + later_s
        if not force and spent + need + reserve > self.spec.budget_s:
            # a cell's training is most of such a step: shorter cells are the other way to fit
            shorter = (
                f"search again with shorter cells (--window, {self.spec.cell_s:g} s a cell now)"
            )
            return self._cannot(spent, need + reserve, "its cells", shorter)
        plan = (
            plan_resume(self.spec.workload, folder, self.env)
            if (folder / "manifest.json").exists()
            else make()
        )
        load = os.getloadavg()
        self.run(plan)
        (folder / "load.json").write_text(
            json.dumps({"load_before": load, "load_after": os.getloadavg()})
        )
        return _rows(folder)

    def _windows(
        self,
        folder: Path,
        make,
        configs: int,
        window_s: float,
        confirming: bool = False,
        last: bool = False,
    ) -> list[Run] | None:
        """A windowed step's rows: read back where its engine ended, else run (or resumed) by
        the engine until each value concludes against the reference or the step's time is
        spent: what is left of the budget less the confirming step's reserve, at most half of
        it unless this is the `last` step to search, never less than its first rounds where they
        fit (plan.tuning.step_share_s)."""
        _same_step(folder, make)
        if _engine_stopped(folder) is not None:
            return read_runs(folder)
        spent, costs = spent_s(self.root)
        reserve = 0.0 if confirming else self._reserve_s(costs)
        left = self.spec.budget_s - spent - reserve
        floor = pairs.budget_floor(1, configs, window_s, pairs.STARTUP_S)
        if left < floor and not confirming:
            return self._cannot(spent, floor + reserve, "two rounds of its windows")
        left = left if confirming else step_share_s(left, last, first_rounds_s(configs, window_s))
        plan = (
            plan_resume(self.spec.workload, folder, self.env)
            if (folder / "manifest.json").exists()
            else make()
        )
        load, started, before = os.getloadavg(), time.time(), _seconds(folder)
        with self.watch(plan, max(left, floor)) as on_row:
            answer(plan, self.env, started + max(left, floor), self.say, on_row)
        seconds = time.time() - started + before
        (folder / "load.json").write_text(
            json.dumps({"load_before": load, "load_after": os.getloadavg(), "seconds": seconds})
        )
        return read_runs(folder)

    def _cannot(self, spent: float, need: float, what: str, otherwise: str = "") -> None:
        """A step the budget cannot pay for: it is not run, the search goes on to the next
        (a windowed step may still fit), and the result says what a full search would need
        (and `otherwise`, another way to fit the step)."""
        left = max(self.spec.budget_s - spent, 0.0)
        self.unpaid = (
            f"about {need:.0f} s for {what} and the confirming step; {left:.0f} s of the budget "
            "were left"
        )
        self.stopped = (
            f"the budget of {self.spec.budget_s:g} s could not pay for every step ({spent:.0f} "
            f"s spent when a step needed about {need:.0f} s more for {what} and the confirming "
            "step): resume with a larger --budget" + (f", or {otherwise}" if otherwise else "")
        )
        return None

    def _reserve_s(self, costs: list[float]) -> float:
        """What the confirming step is kept: a windowed one's first rounds of its two
        configurations where the best so far differs from torch's defaults only in levers a
        process switches, else its cells."""
        if windowed([self.start, self.best]):
            return first_rounds_s(2, step_window_s(self.spec, 2))
        return self._estimate_s(2 * self.spec.repeats, costs)

    def _windowed_after_s(self, index: int) -> float:
        """What the windowed steps to search after step `index` (1-based) are kept from a step
        of process cells before them: each one's first rounds (plan.tuning.first_rounds_s, what
        the engine spends before it judges; their two-round floor, ~9 s each, left them too
        little to conclude). Without it a 300-s tune of cnn-strain spent its budget on inter-op
        threads and binding (both open at 0.99x) and never measured precision, compile or loader
        workers, which had all concluded in a 180-s tune's first 79 s."""
        todo = searched(self.spec)
        batch = int(self.start[BATCH])
        need = 0.0
        for name in levers.NAMES[index:]:
            if name not in todo or name not in WINDOWED_LEVERS:
                continue
            values = levers.tried(levers.get(name), self.host, batch, self.best[name])
            if len(values) >= 2:
                need += first_rounds_s(len(values), step_window_s(self.spec, len(values)))
        return need

    def _estimate_s(self, cells: int, costs: list[float]) -> float:
        return estimate_s(self.spec, cells, costs, process_starts(self.root))

    def _confirm(self, index: int) -> dict:
        best, start = self.best, self.start
        out = {
            "best": best,
            "baseline": start,
            "command": reproduce(self.spec, best),
            "baseline_command": reproduce(self.spec, start),
            "stopped": self.stopped,
        }
        if best == start:
            return {
                **out,
                "gain": None,
                "note": "No lever searched was significantly better than torch's defaults.",
            }
        folder = step_folder(self.root, index, CONFIRM)
        # the budget was reserved for this step: it runs whatever is left
        if windowed([start, best]):
            window_s = step_window_s(self.spec, 2)
            make = lambda: plan_confirm(  # noqa: E731
                self.spec, self.env, folder, [start, best], self.command, window_s
            )
            rows = self._windows(folder, make, 2, window_s, confirming=True)
        else:
            rows = self._study(
                folder,
                lambda: plan_confirm(self.spec, self.env, folder, [start, best], self.command),
                2,
                force=True,
            )
        return {**out, "gain": gain(rows or [], start, best), "confirm_folder": folder.name}

    def _save(self, result: dict | None) -> None:
        state = {
            "spec": self.spec.to_dict(),
            "host": self.host.__dict__ | {"binding": dict(self.host.binding)},
            "steps": self.steps,
            "result": result,
        }
        atomic_write(self.root / TUNE_FILE, json.dumps(state, indent=1, default=str))
        if result is not None:
            atomic_write(self.root / "tune.csv", result_csv(self.steps))


def gain(rows: list[Run], start: dict, best: dict) -> dict | None:
    """The best configuration over torch's defaults, round by round: samples/s, and the time to
    target where every row reached it; the validation metric of each beside them."""

    def config(r):
        return {n: value_of(r, n) for n in levers.NAMES}

    sides = {k: [r for r in rows if config(r) == c] for k, c in (("base", start), ("best", best))}
    out = {}
    for measure in (measure_of(rows, SPEED), TTT):
        by = {k: by_round(v, measure) for k, v in sides.items()}
        v = compare("best", measure, by["base"], by["best"])
        if v.ratio is not None and v.rounds:
            out[SPS if measure == ALL_STEPS else measure] = {
                "ratio": v.ratio,
                "low": v.low,
                "high": v.high,
                "rounds": v.rounds,
                "measure": measure,
                "baseline": v.base,
                "best": v.new,
            }
    out["quality"] = {k: column_median(v, QUALITY) for k, v in sides.items()}
    contended = [r for v in sides.values() for r in v if r.contended]
    out["contended"], out["cells"] = len(contended), sum(map(len, sides.values()))
    return out if SPS in out else None
