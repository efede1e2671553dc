"""The answer to `stbench gpu-vs-cpu`: at each size, the GPU's fastest configuration
against the CPU's fastest (the tuned CPU) and the CPU at its defaults, paired round by round;
the size from which the GPU pays; energy per million samples on both (its picture:
gpu_vs_cpu_picture.py). Pure: a study's frame in, sentences and a table out.

A question study's table is read with its question beside each row (report.model.with_context, from
its manifest): `q_size` (the size axis' value), `q_count` (how many of `q_unit` that is),
`q_default` (1 where the row's CPU levers are the workload's defaults). Without a GPU (a
CPU-only machine, or every GPU cell skipped), the CPU's best configuration besides its defaults
is held against them in the GPU's place: the same sentences, said of two CPU configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..comparison import MARGIN, interval_text, looks_equal, wins_from
from ..contract.params import setting
from ..store.manifest import LEVER_KIND
from .cells import Cell, cells, paired_rounds, ratio, rows_of
from .labels import format_number, short_gpu
from .model import HARDWARE, Key, axes

SPS = "samples_per_s"
QUESTION = ("q_size", "q_count", "q_unit", "q_default", "q_note", "q_kind")


@dataclass(frozen=True)
class Ratio:
    """How many times `other` is `base` in samples/s, with its 95% interval where paired."""

    value: float
    low: float | None = None
    high: float | None = None
    rounds: int = 0

    @property
    def pays(self) -> bool:
        """Significantly faster: the interval lies above 1."""
        return self.low is not None and self.low > 1

    @property
    def loses(self) -> bool:
        return self.high is not None and self.high < 1

    @property
    def equal(self) -> bool:
        """The two look equal: two rounds or more, the interval within the margin."""
        return self.rounds >= 2 and looks_equal(self.low, self.high)

    def text(self) -> str:
        if not math.isfinite(self.value):
            return "-"
        shown = f"{self.value:.2f}x"
        if self.low is None:
            return f"{shown} (one round: no interval)"
        return f"{shown} ({interval_text(self.low, self.high)})"


@dataclass(frozen=True)
class Point:
    """One size of the answer."""

    size: str  # the size axis' value, as the study names it
    count: float  # how many units it is
    other: Cell  # the GPU's fastest cell (without a GPU: the CPU's fastest)
    tuned: Cell  # the CPU's fastest cell
    default: Cell | None  # the CPU at its defaults
    vs_tuned: Ratio
    vs_default: Ratio | None
    energy: tuple[float, float]  # J per million samples: `other`'s, the tuned CPU's (NaN: none)


def _config_keys(s: pd.DataFrame) -> list[Key]:
    """The keys that set a configuration apart: what varies, less the hardware and the size."""
    sizes = {"q_size", *QUESTION}
    size_param = s["q_size"].dropna()
    out = []
    for k in axes(s):
        if k.column in sizes or k == HARDWARE:
            continue
        if k.column.startswith("p.") and s[k.column].astype(str).equals(s["q_size"].astype(str)):
            continue  # the size axis' own parameter
        if (
            k.name == "batch_size"
            and len(size_param)
            and s["batch_size"].astype(str).equals(s["q_size"].astype(str))
        ):
            continue
        out.append(k)
    return out


def _ratio(base: Cell, other: Cell) -> Ratio:
    found = paired_rounds(base, other)
    if found is not None:
        r, lo, hi, n = found
        return Ratio(r, lo, hi, n)
    return Ratio(ratio(base, other))


def _per_million(rows: pd.DataFrame) -> float:
    """Median joules per million samples trained (the cell's whole process: set-up included)."""
    if rows.empty or "steps_done" not in rows:
        return math.nan
    joules = rows[["gpu_energy_j", "cpu_energy_j"]].sum(axis=1, min_count=1)
    samples = rows["steps_done"].astype(float) * rows["global_batch_size"].astype(float)
    per = (joules / samples * 1e6).dropna()
    return float(per.median()) if len(per) else math.nan


def has_gpu(s: pd.DataFrame) -> bool:
    ok = s[s["status"] == "ok"]
    return bool((~ok["device"].astype(str).str.startswith("cpu")).any())


def points(s: pd.DataFrame) -> list[Point]:
    """The answer at each size that has an ok CPU cell, in the order of the sizes."""
    keys = [HARDWARE, *_config_keys(s)]
    gpu = has_gpu(s)
    out = []
    sizes = sorted(dict.fromkeys(s["q_size"].dropna()), key=lambda v: size_count(s, v))
    for size in sizes:
        here = s[(s["q_size"] == size) & (s["status"] == "ok")]
        is_cpu = here["device"].astype(str).str.startswith("cpu")
        cpu = cells(here[is_cpu], SPS, keys)
        if not cpu:
            continue
        tuned = max(cpu, key=lambda c: c.median)
        plain_rows = here[is_cpu & (here["q_default"] == 1)]
        plain = cells(plain_rows, SPS, keys)
        default = plain[0] if plain else None
        if gpu:
            theirs = cells(here[~is_cpu], SPS, keys)
        else:  # the CPU's fastest configuration other than its defaults, in the GPU's place
            theirs = [c for c in cpu if default is None or c.key != default.key]
        if not theirs or (not gpu and default is None):
            continue
        other = max(theirs, key=lambda c: c.median)
        base = tuned if gpu else default
        base_ratio = _ratio(base, other)
        vs_default = _ratio(default, other) if (gpu and default is not None) else None
        energy = (
            _per_million(rows_of(here, keys, other)),
            _per_million(rows_of(here, keys, tuned)),
        )
        out.append(
            Point(
                str(size),
                size_count(s, size),
                other,
                tuned if gpu else default,
                default,
                base_ratio,
                vs_default,
                energy,
            )
        )
    return out


def size_count(s: pd.DataFrame, size) -> float:
    """A size's count of its unit (the FLOPs of a step grow with it); NaN if unknown."""
    found = s.loc[s["q_size"] == size, "q_count"].dropna()
    return float(found.iloc[0]) if len(found) else math.nan


def crossover(found: list[Point]) -> Point | None:
    """The smallest size from which the GPU is significantly faster than the tuned CPU at it and
    every larger size; None where it is not at the largest."""
    start = wins_from([p.vs_tuned.pays for p in found])
    return None if start is None else found[start]


def _first(s: pd.DataFrame, column: str) -> str:
    """The question's value of `column` (the same beside every row of the study), '' if none."""
    found = s[column].dropna() if column in s else ()
    return str(found.iloc[0]) if len(found) else ""


def is_tune_step(s: pd.DataFrame) -> bool:
    """Whether the study is a windowed step of a tune (its "defaults" are the configuration the
    search stood at), not a gpu-vs-cpu question."""
    return _first(s, "q_kind") == LEVER_KIND


def unit_of(s: pd.DataFrame) -> str:
    """The unit of the question's size axis ('curves a batch'), '' if none."""
    return _first(s, "q_unit")


def at_size(p: Point, unit: str) -> str:
    """A size as people say it: '4,096 curves a batch'."""
    return f"{whole(p.count)} {unit}".strip()


def words(s: pd.DataFrame) -> str:
    """'The H100 is 1.10x (0.90-1.30x) the tuned 2-core CPU at 2 series and 38.00x (35-41x) at
    1,089; it starts to pay at 121 series. Against the CPU at its defaults: ...; energy per
    million samples: ...'."""
    found, unit = points(s), unit_of(s)
    if not found:
        return "No size has an ok CPU cell to hold anything against: nothing to answer."
    gpu = has_gpu(s)
    cpu = cpu_name(s)
    step = is_tune_step(s)
    who = (
        gpu_name(s)
        if gpu
        else "The best value tried besides the reference"
        if step
        else f"The {cpu}'s best configuration besides its defaults"
    )
    against = (
        f"the tuned {cpu}"
        if gpu
        else f"the {cpu} at the step's reference (the configuration the search stood at)"
        if step
        else f"the {cpu} at its defaults"
    )
    first, *rest = found
    each = [f"{first.vs_tuned.text()} the samples/s of {against} at {at_size(first, unit)}"]
    each += [f"{p.vs_tuned.text()} at {at_size(p, unit)}" for p in rest]
    head = f"{who} trains {_list(each)}"
    start = crossover(found)
    wins = [p for p in found if p.vs_tuned.pays]
    if start is None and wins:
        at = f"{_list([at_size(p, unit) for p in wins])} but not at {at_size(found[-1], unit)}"
        said = (
            f"it {'pays' if gpu else 'is faster'} significantly at {at}"
            if gpu
            else (f"it is significantly faster at {at}")
        )
    elif start is None and not gpu and all(p.vs_tuned.loses for p in found):
        said = f"it is significantly slower at every size up to {at_size(found[-1], unit)}: " + (
            "the reference stays" if step else "the defaults are the CPU's best configuration here"
        )
    elif start is None:
        said = (
            f"it does not pay significantly at any size up to {at_size(found[-1], unit)}"
            if gpu
            else f"it is not significantly faster at any size up to {at_size(found[-1], unit)}"
        )
    elif start is found[0]:
        said = f"it {'pays' if gpu else 'is faster'} at every size, from {at_size(start, unit)}"
    elif gpu:
        said = f"it starts to pay at {at_size(start, unit)}"
    else:
        said = f"it is faster from {at_size(start, unit)}"
    text = f"{head}; {said}."
    # the sizes where the tuned CPU is a lever, not the defaults themselves (the same ratio)
    tuned_apart = [p for p in found if p.vs_default is not None and p.tuned.key != p.default.key]
    if gpu and tuned_apart:
        plain = [f"{p.vs_default.text()} at {at_size(p, unit)}" for p in tuned_apart]
        text += f" Against the {cpu} at its defaults: {_list(plain)}."
    defaults_best = [at_size(p, unit) for p in found if p not in tuned_apart]
    if gpu and defaults_best:
        where = "every size" if not tuned_apart else _list(defaults_best)
        text += f" At {where} the {cpu}'s defaults were its fastest configuration."
    if step:
        text += " A step of a tune: the tune's answer says what the search kept."
    elif not gpu:
        text += " No GPU ran: on a GPU machine the same command holds the GPU against both."
    energy = [
        f"{format_number(p.energy[0])} vs {format_number(p.energy[1])} J at {at_size(p, unit)}"
        for p in found
        if all(math.isfinite(e) for e in p.energy)
    ]
    if energy and gpu:
        text += f" Energy per million samples, GPU vs tuned {cpu}: {_list(energy)}."
    elif gpu:
        text += f" Energy per million samples: not measured ({_energy_why(s)})."
    for size, why in _unanswered(s, found):
        text += f" No answer at {size}: {why}."
    equal = [at_size(p, unit) for p in found if p.vs_tuned.equal]
    if equal:
        text += (
            f" At {_list(equal)} the two look equal: the interval lies within "
            f"{1 - MARGIN:.2f}-{1 + MARGIN:.2f}x."
        )
    note = _first(s, "q_note")
    if note:
        text += f" {note}"
    return text


def _unanswered(s: pd.DataFrame, found: list[Point]) -> list[tuple[str, str]]:
    """The sizes measured that have no answer, each with why: the device whose configurations
    all ended otherwise than ok (out of memory, failed, skipped: its rows' first reason), else a
    size the budget ended at after one round, else a size where one configuration ran (the
    others had left the study: a lever outgrown, a compilation the budget could not pay), else
    a side with no steady step in its window."""
    said, unit = {p.size for p in found}, unit_of(s)
    sizes = sorted(dict.fromkeys(s["q_size"].dropna()), key=lambda v: size_count(s, v))
    keys = [HARDWARE, *_config_keys(s)]
    out = []
    for v in sizes:
        if v in said:
            continue
        here = s[s["q_size"] == v]
        ok = here[here["status"] == "ok"]
        why = "a side had no steady step in its window (--window)"
        if ok["repeat"].nunique() < 2:
            why = (
                "one round only: the budget ended before the second (--resume it, or a larger "
                "--budget)"
            )
        elif len(ran := cells(ok, SPS, keys)) == 1:  # the others left the study before it
            defaults = (ok["q_default"] == 1).all() and ok["device"].astype(str).eq("cpu").all()
            who = "the CPU at its defaults" if defaults else f"one configuration ({ran[0].name})"
            why = f"only {who} ran there, the others no longer measured (as said below)"
        for device, rows in here.groupby(here["device"].astype(str)):
            if not (rows["status"] == "ok").any():
                first = rows.iloc[0]
                why = f"{device} ended {first['status']} ({first['reason']})"
                break
        out.append((f"{whole(size_count(s, v))} {unit}".strip(), why))
    return out


def _list(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _energy_why(s: pd.DataFrame) -> str:
    methods = [str(m) for m in s.get("cpu_energy_method", pd.Series(dtype=object)).dropna()]
    none = [m for m in methods if m.startswith("none")]
    return none[0] if none else "no energy figure in the rows"


def gpu_name(s: pd.DataFrame) -> str:
    gpu = s[~s["device"].astype(str).str.startswith("cpu")]
    names = gpu["device_name"].dropna().astype(str) if "device_name" in gpu else pd.Series()
    return f"The {short_gpu(names.iloc[0])}" if len(names) else "The GPU"  # as every label


def cpu_name(s: pd.DataFrame) -> str:
    cpu = s[s["device"].astype(str).str.startswith("cpu")]
    cores = cpu["cores"].dropna() if "cores" in cpu else pd.Series(dtype=float)
    return f"{int(cores.iloc[0])}-core CPU" if len(cores) else "CPU"


def view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """One line per size: each side's samples/s, the ratios, what the fastest cells ran with and
    (with a GPU) the energy per million samples."""
    found, unit = points(s), unit_of(s)
    gpu, keys = has_gpu(s), _config_keys(s)
    step = is_tune_step(s)
    energy = any(math.isfinite(e) for p in found for e in p.energy)
    rows = []
    for p in found:
        row = {unit or "size": whole(p.count), "GFLOP a step": _gflop(s, p.size)}
        if gpu:
            row |= {  # the ratios first: a table split to fit a screen keeps them in its first
                "x tuned": p.vs_tuned.text(),
                "x defaults": p.vs_default.text() if p.vs_default else "-",
                "GPU": p.other.amount(),
                "tuned CPU": p.tuned.amount(),
                "CPU defaults": p.default.amount() if p.default else "-",
                "GPU ran": _settings(keys, p.other, p.default),
                "CPU tuned": _settings(keys, p.tuned, p.default),
            }
            if energy:  # a question's windows record none: no column of dashes
                row["J per M samples"] = (
                    f"{format_number(p.energy[0])} vs {format_number(p.energy[1])}"
                )
        elif step:  # a tune's windowed step: the best value tried against its reference
            row |= {
                "x reference": p.vs_tuned.text(),
                "best tried": p.other.amount(),
                "reference": p.tuned.amount(),
                "best ran": _settings(keys, p.other, p.default),
            }
        else:  # no GPU: the CPU's best configuration besides its defaults, which may be slower
            row |= {
                "x defaults": p.vs_tuned.text(),
                "best other": p.other.amount(),
                "CPU defaults": p.tuned.amount(),
                "other ran": _settings(keys, p.other, p.default),
            }
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["keys"] = [unit or "size"]
    return "samples/s at each size (median ± 95% CI; ratios paired by round, 95% CI)", table


def _gflop(s: pd.DataFrame, size: str) -> str:
    """A training step's GFLOP at a size (the counted FLOPs a sample times the batch)."""
    here = s[(s["q_size"] == size) & (s["status"] == "ok")]
    if "flops_per_sample" not in here:
        return "-"
    per = (
        here["flops_per_sample"].astype(float) * here["global_batch_size"].astype(float)
    ).dropna()
    return f"{per.median() / 1e9:.3g}" if len(per) else "-"


def _settings(keys: list[Key], cell: Cell, default: Cell | None) -> str:
    """What a cell ran with that the CPU at its defaults did not: 'precision=bf16'."""
    if default is None:
        return cell.name
    mine = dict(zip((k.name for k in keys), cell.key[1:]))
    theirs = dict(zip((k.name for k in keys), default.key[1:]))
    changed = [setting(k, v) for k, v in mine.items() if str(v) != str(theirs.get(k))]
    return ", ".join(changed) or "its defaults"


def whole(count: float) -> str:
    """A count as people write it: 32,768."""
    return f"{int(count):,}" if float(count).is_integer() else f"{count:,.3g}"
