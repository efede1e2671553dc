"""Judging a cell's repeats (pure): flags where its numbers cannot be trusted at a glance, as
pyperf warns of an unstable benchmark, and the regression gate's verdict against a baseline's.

Flags, each with its reason, for one cell's repeats (or one run):

    spread    the standard deviation of the main measure is > 10% of its mean over the repeats
    load      the 1-minute load average rose above the machine's cores (the cell's own included)
    busy      other processes used > 25% of all cores on average while a run ran
    steal     a hypervisor took > 5% of the cores for other guests (CPU steal)
    throttle  NVML reported the GPU's clocks slowed (power cap, thermal, hardware) in > 5% of
              samples
    contended other processes used more cores than the cell's threads left free (the load
              check before a CPU cell and its samples: store.conditions)

A device study adds its own (`device_flags`): a CPU cell held against a GPU with fewer threads
than cores not chosen for the load, or another batch size; runs too short for energy meters.

The machine's figures are the row's `Conditions` columns (report.read.conditions_of).

The gate gives each cell and metric one verdict, judged as `compare` judges a ratio:
- `regression`: worse than its baseline by more than the margin *and* the difference is
  significant (both sides have >= 2 repeats, their 95% intervals do not overlap, Welch's
  t-test p < 0.05), or it ended ok in the baseline and not now;
- `inconclusive`: worse by more than the margin but not significant: the repeats cannot tell a
  slowdown from noise, and the verdict names the repeats per side that could (repeats_needed);
  never `ok`, since a 30% slowdown on one repeat is not a pass;
- `unchanged`: the medians differ by less than 0.05%, which the line would print as 0.0%;
- `ok`: better, or worse within the margin.
Cells are matched by what ran (workload, device kind, strategy, world, batch, epochs,
parameters), not by machine: CI runners change hosts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from ..comparison import SPS, TTT, WALL, Verdict, number
from ..comparison import judge as compare
from ..device import parse
from ..errors import StbenchError
from ..stats import repeats_needed
from ..store.rows import Run
from .cells import Cell, cells, groups
from .labels import format_number
from .model import HARDWARE, Key, axes, few_threads, frame, keys_of, name_of
from .read import SKIPPED_EXIT, conditions_of
from .speed import held, matches

CV_LIMIT = 0.10  # pyperf's: a standard deviation above 10% of the mean
OTHERS_LIMIT = 25.0  # % of all cores used by other processes
STEAL_LIMIT = 5.0  # % of all cores taken by the hypervisor
THROTTLE_LIMIT = 0.05  # share of a run's samples with the GPU's clocks slowed
UNCHANGED = 0.0005  # a relative change the gate's line would print as 0.0%


@dataclass(frozen=True)
class Flag:
    kind: str  # spread | load | busy | steal | throttle | contended
    reason: str  # one line: what was seen, against which limit

    def __str__(self) -> str:
        return self.reason


def main_measure(runs: Sequence[Mapping], windows: bool = False) -> str:
    """The measure whose spread over a cell's repeats is flagged: samples/s in a study of the
    questions' engine (`windows`: gpu-vs-cpu, `run --budget`'s windows, where every cell trains a
    window; a fact of the study's question, never of its rows), the
    time to target where two or more reached it (a target none reached has no spread to
    judge), else the wall time the report's tables show first (a run's whole cost, start-up
    included: what its repeats should agree on)."""
    if windows:
        return SPS
    return TTT if sum(number(r.get(TTT)) is not None for r in runs) >= 2 else WALL


def noise_flags(
    runs: Sequence[Mapping], metric: str | None = None, windows: bool = False
) -> list[Flag]:
    """Flags of one cell's runs (Runs, or a study frame's rows); `metric` the measure whose
    spread counts (main_measure's, for a study whose rows are `windows` or not, by default)."""
    metric = metric or main_measure(runs, windows)
    seen = [conditions_of(r) for r in runs]
    spread = _spread(runs, metric, "windows" if windows else "repeats")
    return [f for f in (spread, *_busy(runs, seen)) if f is not None]


def _spread(runs: Sequence[Mapping], metric: str, over: str) -> Flag | None:
    values = [
        v for r in runs if r.get("status") == "ok" and (v := number(r.get(metric))) is not None
    ]
    if len(values) < 2 or statistics.mean(values) <= 0:
        return None
    sd, mean = statistics.stdev(values), statistics.mean(values)
    if sd <= CV_LIMIT * mean:
        return None
    return Flag(
        "spread",
        f"unstable: the standard deviation of {metric} ({format_number(sd)}) is "
        f"{sd / mean:.0%} of the mean ({format_number(mean)}) over {len(values)} {over} "
        f"(limit {CV_LIMIT:.0%})",
    )


# The flags of a share of the CPUs above its limit: (kind, Conditions field, limit, wording)
SHARES = (
    ("busy", "others_cpu_pct", OTHERS_LIMIT, "other processes used {:.0f}% of the CPUs"),
    ("steal", "cpu_steal_pct", STEAL_LIMIT, "the hypervisor took {:.0f}% of the CPUs (steal)"),
)


def _busy(runs: Sequence[Mapping], seen: list) -> list[Flag]:
    """The machine's flags of a cell's runs (their Conditions, `seen`), in the order a reader
    weighs them: contended, load, busy, steal, throttle."""

    def when(k: int) -> str:
        return "while it ran" if len(seen) == 1 else f"in {k} of {len(seen)} runs"

    flags = []
    contended = [c.contention or "contended" for c in seen if c.contended]
    if contended:
        many = "" if len(seen) == 1 else f" ({when(len(contended))})"
        flags.append(Flag("contended", contended[0] + many))
    cores = [number(r.get("cores")) for r in runs]
    # The load average counts the cell's own threads and stbench's beside them, and lags a
    # minute (the cell before is in it): a cell that fills the cores read 2.1 on 2 of them,
    # every cell of a study. Where the other processes' share was measured, that share judges
    # (SHARES); the load judges a row without it.
    load = [
        (c.load_max, n)
        for c, n in zip(seen, cores)
        if c.others_cpu_pct is None and _above(c.load_max, n)
    ]
    if load:
        (most, on), k = max(load), len(load)
        flags.append(
            Flag("load", f"busy: the load average reached {most:.1f} on {on:.0f} cores {when(k)}")
        )
    for kind, field, limit, words in SHARES:
        over = [v for c in seen if _above(v := getattr(c, field), limit)]
        if over:
            reason = f"busy: {words.format(max(over))} {when(len(over))} (limit {limit:.0f}%)"
            flags.append(Flag(kind, reason))
    slowed = [c for c in seen if _above(c.gpu_throttle_share, THROTTLE_LIMIT)]
    if slowed:
        share = max(c.gpu_throttle_share for c in slowed)
        reason = (
            f"throttled: the GPU slowed its clocks ({_reasons(slowed)}) in up to {share:.0%} "
            f"of the samples {when(len(slowed))}"
        )
        flags.append(Flag("throttle", reason))
    return flags


def _above(value, limit) -> bool:
    """A figure present and above its limit (a limit of None or 0: no limit known)."""
    return value is not None and bool(limit) and value > limit


def _reasons(seen: list) -> str:
    names = [n.strip() for c in seen for n in str(c.gpu_throttle or "").split(",") if n.strip()]
    return ", ".join(dict.fromkeys(names)) or "reason not named"


def study_flags(s: pd.DataFrame, windows: bool = False) -> list[str]:
    """A study's flags (its table; `windows` where its rows are the questions' engine's, as
    model.Study.windows says): one line per kind, naming the first cell it hit and how many
    others."""
    hits: dict[str, list[tuple[str, str]]] = {}
    varied = axes(s)
    for _, rows in groups(s, keys_of(s), ordered=False):
        first = rows.iloc[0]
        name = name_of(varied, [first[k.column] for k in varied])
        for flag in noise_flags(rows.to_dict("records"), windows=windows):
            hits.setdefault(flag.kind, []).append((name, flag.reason))
    lines = []
    for found in hits.values():
        (name, reason), others = found[0], len(found) - 1
        lines.append(
            (f"{name}: " if name else "")
            + reason
            + (f" (and {others} other cells)" if others else "")
        )
    return lines


def device_flags(s: pd.DataFrame) -> list[str]:
    """A device study's flags where its comparison may flatter the GPU: a CPU cell
    held against a GPU that ran fewer threads than the machine's cores without choosing so for
    the load, or a batch size other than the GPU cell's; runs too short for the energy meters."""
    out = []
    for m in matches(s)[1]:
        gpu = m.rows(s, m.gpu, base=False)
        compared = [gpu]
        for cell, _ in held(s, m):
            rows = m.rows(s, cell)
            compared.append(rows)
            where = m.base + (f", {m.settings(cell)}" if m.configs > 1 else "")
            out += few_threads(rows, where)
            theirs = "/".join(str(int(b)) for b in sorted(set(gpu["batch_size"])))
            other = sorted(set(rows["batch_size"]) - set(gpu["batch_size"]))
            if other:
                out.append(
                    f"{where}: batch_size={'/'.join(str(int(b)) for b in other)} against "
                    f"{theirs} on {m.label}, the cell it is compared with: not the same work"
                )
        every = pd.concat(compared)
        short = int((every["energy_short"] == 1).sum())
        if short:
            out.append(
                f"energy: {short} of {len(every)} runs compared were metered under 60 s "
                "(energy_short), too short for the meters (NVML's counter updates every "
                "20-100 ms; MLPerf asks for 60 samples at 1 Hz)"
            )
    return list(dict.fromkeys(out))


def gate(
    base: Sequence[Run],
    new: Sequence[Run],
    metrics: tuple[str, ...] = ("wall_s",),
    margin: float = 0.10,
) -> list[Verdict]:
    """One verdict per cell present on both sides and metric."""
    df = frame(
        [replace(r, folder=side) for side, runs in (("base", base), ("new", new)) for r in runs]
    )
    df["label"] = [parse(d).kind for d in df["device"]]  # the device kind, whichever host ran it
    keys = [Key("workload", "workload"), *keys_of(df)]
    out = []
    for metric in metrics:
        if metric not in df.columns:
            raise StbenchError(f"unknown metric {metric!r}: runs.csv has no such column")
        sides = [
            {c.shown: c for c in cells(df[df["study"] == side], metric, keys, every=True)}
            for side in ("base", "new")
        ]
        matched = [(sides[0][k], sides[1][k]) for k in sides[0] if k in sides[1]]
        if not matched:
            raise StbenchError(
                "no cell of the new run matches a cell of the baseline (same "
                "workload, device kind, strategy, world, batch size, epochs and "
                "parameters)"
            )
        out += [_verdict(_cell_name(keys, b.key), metric, b, n, margin) for b, n in matched]
    return out


def _cell_name(keys: list[Key], values: tuple) -> str:
    shown = dict(zip((k.name for k in keys), values))
    parts = [str(shown["workload"]), str(shown[HARDWARE.name]), str(shown["strategy"])]
    return " ".join(parts + [f"{k}={v}" for k, v in list(shown.items())[3:] if k != "strategy"])


def _verdict(cell: str, metric: str, base: Cell, new: Cell, margin: float) -> Verdict:
    """The gate's verdict of one cell (comparison.Verdict): regression where it is
    significantly worse by more than the margin or no longer ok, inconclusive where worse by
    more than the margin without being significant (with the repeats that could settle it)."""
    b, n, repeats = base.median, new.median, (len(base.values), len(new.values))
    said = {"subject": cell, "measure": metric, "base": b, "new": n, "repeats": repeats}
    if base.status == "ok" and new.status != "ok":
        note = f"ended {new.status} (ok in the baseline)"
        return Verdict(**said, change=math.inf, significant=True, kind="regression", note=note)
    if not (math.isfinite(b) and math.isfinite(n)) or b == 0:
        return Verdict(**said, kind="no value", note="no value on one side")
    v = compare(cell, metric, list(base.values), list(new.values))  # repeats: unpaired
    said |= {"change": v.change, "significant": v.significant}
    if abs(v.change) < UNCHANGED:
        return Verdict(**said, kind="unchanged")
    if v.change <= margin:
        return Verdict(**said, kind="ok")
    if v.significant:
        return Verdict(**said, kind="regression")
    needs = repeats_needed(list(base.values), list(new.values))
    return Verdict(**said, kind="inconclusive", needs=needs)


def gate_exit_code(verdicts: list[Verdict], skipped: bool = False) -> int:
    """1 on a regression; 4 where none is but a result folder was left out (a cell may be
    missing); 3 where a cell is inconclusive (a CI fails on it too, unless it allows 3: rerun
    with more repeats); 0 otherwise."""
    if any(v.regression for v in verdicts):
        return 1
    if skipped:
        return SKIPPED_EXIT
    return 3 if any(v.kind == "inconclusive" for v in verdicts) else 0
