"""Numbers to trust at a glance, as pyperf warns of an unstable benchmark: flags, each with its
reason, for one cell's repeats (or one row) whose measure spread widely or that ran while the
machine was busy. Pure: rows in, flags out (compare, the report and the run's summary show them).

    spread    the standard deviation of the main measure is > 10% of its mean over the repeats
    load      the 1-minute load average rose above the machine's cores (the cell's own included)
    busy      other processes used > 25% of all cores on average while a run ran
    steal     a hypervisor took > 5% of the cores for other guests (CPU steal)
    throttle  NVML reported the GPU's clocks slowed (power cap, thermal, hardware) in > 5% of samples
    contended other processes used more cores than the cell's threads left free (store.conditions)

The machine's figures are the runs.csv row's `Conditions` columns; a row of an older stbench
lacks them, and then its system.csv samples (`system=`) give what they can (the other
processes' share: older samples have no load, steal or slowdown reasons).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from ..store.conditions import conditions, number
from ..store.rows import Conditions
from .frame import keys_of, varying
from .stats import format_number, show

CV_LIMIT = 0.10  # pyperf's: a standard deviation above 10% of the mean
OTHERS_LIMIT = 25.0  # % of all cores used by other processes
STEAL_LIMIT = 5.0  # % of all cores taken by the hypervisor
THROTTLE_LIMIT = 0.05  # share of a run's samples with the GPU's clocks slowed
# what makes two rows repeats of one cell (the repeat, its seed and run id aside)
CELL = ("workload", "device", "strategy", "world_size", "nodes", "batch_size", "epochs", "params", "machine_id")


@dataclass(frozen=True)
class Flag:
    kind: str  # spread | load | busy | steal | throttle | contended
    reason: str  # one line: what was seen, against which limit

    def __str__(self) -> str:
        return self.reason


def main_measure(rows: list[dict]) -> str:
    """The measure a cell's repeats are judged on: the time to target where two or more reached
    it (a target none reached has no spread to judge), else wall_s."""
    reached = [r for r in rows if number(r.get("time_to_target_s")) is not None]
    return "time_to_target_s" if len(reached) >= 2 else "wall_s"


def by_cell(rows: list[dict]) -> list[list[dict]]:
    """The rows grouped into cells (repeats together), in the order the cells first appear."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault(tuple(str(r.get(k, "")) for k in CELL), []).append(r)
    return list(cells.values())


def noise_flags(rows: list[dict], metric: str | None = None, system: list[dict] | None = None) -> list[Flag]:
    """Flags of one cell's repeats, or of one row: `rows` are its runs.csv rows (as read back,
    text, or as written); `metric` the measure whose spread counts (main_measure by default);
    `system` system.csv rows (any runs') for rows without the Conditions columns."""
    metric = metric or main_measure(rows)
    runs = [run_conditions(r, system) for r in rows]
    return [f for f in (_spread(rows, metric), *_busy(rows, runs)) if f is not None]


def run_conditions(row: dict, system: list[dict] | None = None) -> Conditions:
    """The row's own Conditions columns, or, where it has none, its system.csv samples'."""
    names = asdict(Conditions())
    if any(row.get(k) not in (None, "") for k in names):
        return Conditions(**{k: _value(k, row.get(k)) for k in names})
    return conditions([s for s in system or () if s.get("run_id") == row.get("run_id")], row.get("cores"))


def _value(name: str, value):
    """A Conditions column as read back: text as is, true/false as a bool, numbers as floats."""
    if name in ("gpu_throttle", "contention"):
        return value if value not in ("", None) else None
    if name == "contended":  # "True" as read from runs.csv, 1.0 from a report frame
        return None if value in ("", None) or value != value else str(value) in ("True", "1", "1.0")
    return number(value)


def _spread(rows: list[dict], metric: str) -> Flag | None:
    values = [v for r in rows if r.get("status") == "ok" and (v := number(r.get(metric))) is not None]
    if len(values) < 2 or statistics.mean(values) <= 0:
        return None
    sd, mean = statistics.stdev(values), statistics.mean(values)
    if sd <= CV_LIMIT * mean:
        return None
    return Flag("spread", f"unstable: the standard deviation of {metric} ({format_number(sd)}) is {sd / mean:.0%} "
                          f"of the mean ({format_number(mean)}) over {len(values)} repeats (limit {CV_LIMIT:.0%})")


def _busy(rows: list[dict], runs: list[Conditions]) -> list[Flag | None]:
    cores = [number(r.get("cores")) for r in rows]
    load = [(c.load_max, n) for c, n in zip(runs, cores) if c.load_max is not None and n and c.load_max > n]
    others = [c.others_cpu_pct for c in runs if c.others_cpu_pct is not None and c.others_cpu_pct > OTHERS_LIMIT]
    steal = [c.cpu_steal_pct for c in runs if c.cpu_steal_pct is not None and c.cpu_steal_pct > STEAL_LIMIT]
    slowed = [c for c in runs if number(c.gpu_throttle_share) is not None and c.gpu_throttle_share > THROTTLE_LIMIT]
    when = lambda k: "while it ran" if len(runs) == 1 else f"in {k} of {len(runs)} runs"  # noqa: E731
    contended = [c.contention or "contended" for c in runs if c.contended]  # issue 32
    return [
        Flag("contended", contended[0] + ("" if len(runs) == 1 else f" ({when(len(contended))})"))
        if contended else None,
        Flag("load", f"busy: the load average reached {max(load)[0]:.1f} on {max(load)[1]:.0f} cores {when(len(load))}")
        if load else None,
        Flag("busy", f"busy: other processes used {max(others):.0f}% of the CPUs {when(len(others))} "
                     f"(limit {OTHERS_LIMIT:.0f}%)") if others else None,
        Flag("steal", f"busy: the hypervisor took {max(steal):.0f}% of the CPUs (steal) {when(len(steal))} "
                      f"(limit {STEAL_LIMIT:.0f}%)") if steal else None,
        Flag("throttle", f"throttled: the GPU slowed its clocks ({_reasons(slowed)}) in up to "
                         f"{max(c.gpu_throttle_share for c in slowed):.0%} of the samples {when(len(slowed))}")
        if slowed else None,
    ]


def _reasons(runs: list[Conditions]) -> str:
    names = [n.strip() for c in runs for n in str(c.gpu_throttle or "").split(",") if n.strip()]
    return ", ".join(dict.fromkeys(names)) or "reason not named"


def study_flags(s) -> list[str]:
    """A study's flags for compare and the report (`findings.Flagger`): one line per kind, naming
    the first cell it hit and how many others; `s` is the study's report frame."""
    rows = s.astype(object).where(s.notna(), None).to_dict("records")  # NaN read as missing
    cells = by_cell(rows)
    varied = varying(s, keys_of(s))
    hits: dict[str, list[tuple[str, str]]] = {}
    for cell in cells:
        name = ", ".join(f"{k.removeprefix('p.')}={show(cell[0][k])}" for k in varied)
        for flag in noise_flags(cell):
            hits.setdefault(flag.kind, []).append((name, flag.reason))
    lines = []
    for found in hits.values():
        (name, reason), others = found[0], len(found) - 1
        lines.append((f"{name}: " if name else "") + reason + (f" (and {others} other cells)" if others else ""))
    return lines

