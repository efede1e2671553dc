"""How `stbench tune` judges one step (issue 32): every value tried against the step's reference
(the best so far), round by round. Repeats run as the study's outer loop, so the cells of one
round saw the same machine: each round gives a ratio, and the 95% t-interval of their geometric
mean (stbench.stats.paired) says whether a value is better. A value is kept only when that
interval lies above 1 and its validation metric is no worse than the reference's by more than
QUALITY_TOLERANCE. The tune's finding (`finding`) words these verdicts from tune.json: the best
configuration, its gain over torch's defaults with its interval, what each step kept, what was
not searched or not available, the cells that ran contended, and the options that reproduce it.
Pure.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

from ..stats import paired
from .levers import BATCH, Lever

SPS, TTT, QUALITY = "samples_per_s", "time_to_target_s", "val_value"
# samples/s over every step, warm-up included: the measure of a step where a cell ended inside
# its warm-up (a contended cell may take seconds a step), so that no round loses its pair
ALL_STEPS = "samples_per_s_all_steps"
QUALITY_TOLERANCE = 0.05  # a faster value that learns more than 5% worse is not kept
LOWER_IS_BETTER = {TTT, QUALITY}


@dataclass(frozen=True)
class Verdict:
    """One value of a step against the reference: ratio > 1 is better, whatever the measure."""

    value: object
    ratio: float | None = None  # geometric mean of the per-round ratios
    low: float | None = None  # its 95% interval (None with fewer than two rounds)
    high: float | None = None
    rounds: int = 0
    median: float | None = None  # the measure's median over the value's ok rows
    samples_per_s: float | None = None
    quality: float | None = None  # median validation metric (lower is better)
    note: str = ""  # failed rows, or why a better value was not kept

    @property
    def significant(self) -> bool:
        return self.low is not None and self.low > 1.0


def value_of(row: dict, lever: str) -> object:
    """The lever's value in a row (runs.csv text, or a row as written)."""
    if lever == BATCH:
        return int(row["batch_size"])
    return json.loads(row["params"])[lever]


def number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def measure_of(lever: Lever | None, rows: list[dict]) -> str:
    """Throughput (steady, or over all steps where a cell had no steady steps), or for a lever
    that changes what is learned the time to target where every ok row reached it, else the
    validation metric after the same training seconds."""
    ok = [r for r in rows if r["status"] == "ok"]
    if lever is None or not lever.quality_judged:
        return SPS if all(number(r.get(SPS)) is not None for r in ok) else ALL_STEPS
    return TTT if ok and all(number(r.get(TTT)) is not None for r in ok) else QUALITY


def measured(row: dict, measure: str) -> float | None:
    """A row's value of a measure (ALL_STEPS computed from its steps and training seconds)."""
    if measure != ALL_STEPS:
        return number(row.get(measure))
    steps, seconds = number(row.get("steps_done")), number(row.get("train_s"))
    world = number(row.get("world_size")) or 1
    return steps * float(row["batch_size"]) * world / seconds if steps and seconds else None


def by_round(rows: list[dict], measure: str) -> dict[int, float]:
    return {
        int(r["repeat"]): v
        for r in rows
        if r["status"] == "ok" and (v := measured(r, measure)) is not None
    }


def _median(rows: list[dict], column: str) -> float | None:
    values = [v for r in rows if r["status"] == "ok" and (v := measured(r, column)) is not None]
    return statistics.median(values) if values else None


def judge(lever: Lever, rows: list[dict], reference: object) -> tuple[str, list[Verdict], object]:
    """(measure, a verdict per value tried, the value kept) of one step's rows."""
    measure = measure_of(lever, rows)
    groups: dict[object, list[dict]] = {}
    for r in rows:
        groups.setdefault(value_of(r, lever.name), []).append(r)
    ref_rows = groups.get(reference, [])
    ref = by_round(ref_rows, measure)
    ref_quality = _median(ref_rows, QUALITY)
    verdicts = []
    for value, group in groups.items():
        ratio, low, high, n = paired(ref, by_round(group, measure), measure in LOWER_IS_BETTER)
        failed = [f"{r['status']}: {r['reason']}" for r in group if r["status"] != "ok"]
        quality = _median(group, QUALITY)
        note = f"{len(failed)} of {len(group)} runs not ok ({failed[0]})" if failed else ""
        if (
            value != reference
            and low is not None
            and low > 1
            and measure != QUALITY
            and _worse(quality, ref_quality)
        ):
            note = (
                f"faster, but its validation metric {quality:.4g} is more than "
                f"{QUALITY_TOLERANCE:.0%} worse than {ref_quality:.4g}"
            )
        verdicts.append(
            Verdict(
                value,
                ratio,
                low,
                high,
                n,
                _median(group, measure),
                _median(group, SPS),
                quality,
                note,
            )
        )
    keep = [v for v in verdicts if v.value != reference and v.significant and not v.note]
    kept = max(keep, key=lambda v: v.ratio).value if keep else reference
    return measure, verdicts, kept


def _worse(quality: float | None, reference: float | None) -> bool:
    return (
        quality is not None
        and reference is not None
        and quality > reference * (1 + QUALITY_TOLERANCE)
    )


# The tune's finding: tune.json (runner.tune) in, plain sentences out.
MEASURES = {
    "samples_per_s": "samples/s",
    "time_to_target_s": "time to target",
    "val_value": "validation metric after the same training seconds",
    "samples_per_s_all_steps": "samples/s over all steps (a cell ended inside its warm-up)",
}


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _interval(d: dict) -> str:
    if d.get("low") is None:
        return f"{_x(d.get('ratio'))}, one round: no interval"
    return f"{_x(d['ratio'])}, 95% interval {d['low']:.2f}-{d['high']:.2f}x"


def _changed(result: dict) -> list[str]:
    best, base = result["best"], result["baseline"]
    return [f"{k}={best[k]} (torch's default: {base[k]})" for k in best if best[k] != base[k]]


def _gain(result: dict) -> str:
    gain = result.get("gain")
    if not gain:
        return "The confirming step has no ok rows: no gain can be stated."
    sps = gain["samples_per_s"]
    verdict = (
        "significantly faster than"
        if sps.get("low") and sps["low"] > 1
        else "not significantly different from"
        if sps.get("low")
        else "measured once against"
    )
    what = MEASURES.get(sps.get("measure", "samples_per_s"), "samples/s")
    text = (
        f"In the confirming step ({sps['rounds']} rounds side by side) it was {verdict} "
        f"torch's defaults: {_interval(sps)} their {what} ({sps['best']:,.0f} vs "
        f"{sps['baseline']:,.0f})"
    )
    ttt = gain.get("time_to_target_s")
    if ttt and ttt.get("low") and ttt["low"] > 1:
        text += f"; it reached the target {_interval(ttt)} sooner"
    elif ttt:  # the rounds where both reached it
        text += f"; time to target: no significant difference ({_interval(ttt)})"
    quality = gain.get("quality") or {}
    if quality.get("best") is not None and quality.get("base") is not None:
        text += f"; validation metric {quality['best']:.4g} vs {quality['base']:.4g}"
    hit, _, total = gain.get("contended", "0 of 0").partition(" of ")
    if hit != "0":
        text += f"; {hit} of its {total} cells ran contended"
    return text + "."


def _step(s: dict) -> str:
    if not s.get("verdicts"):
        return f"{s['lever']}: {s.get('note') or 'not searched'}"
    tried = [v for v in s["verdicts"] if v["value"] != s["reference"]]
    parts = [
        f"{s['lever']}={v['value']}: {_interval(v)}" + (f" ({v['note']})" if v["note"] else "")
        for v in tried
    ]
    kept = s["kept"] != s["reference"]
    head = (
        f"{s['lever']} {s['reference']} -> {s['kept']} kept"
        if kept
        else f"{s['lever']} stays {s['reference']}"
    )
    return f"{head} [{MEASURES.get(s['measure'], s['measure'])}: {'; '.join(parts)}]"


def finding(state: dict) -> str:
    """The tune's finding as plain text (a paragraph, then one line per step)."""
    spec, result, steps = state["spec"], state.get("result") or {}, state.get("steps", [])
    host = state.get("host", {})
    changed = _changed(result) if result else []
    head = (
        f"{spec['workload']} on this CPU ({host.get('physical', '?')} physical cores, "
        f"{spec['cell_s']:g} s of training per cell, {spec['repeats']} rounds per step): "
    )
    head += (
        f"the best configuration found changes {', '.join(changed)}."
        if changed
        else "torch's defaults were the best configuration found."
    )
    lines = [head, *([_gain(result)] if changed else [])]
    contended = [s["contended"] for s in steps if s.get("contended")]
    hit = sum(int(c.split(" of ")[0]) for c in contended)
    if hit:
        total = sum(int(c.split(" of ")[1]) for c in contended)
        lines.append(
            f"{hit} of {total} search cells ran contended (other processes used cores "
            "their threads needed): rerun on a quiet machine before trusting the steps."
        )
    if result.get("stopped"):
        lines.append(f"Not every lever was searched: {result['stopped']}.")
    missing = [m for s in steps for m in s.get("missing", [])]
    if missing:
        lines.append(f"Not available here: {'; '.join(missing)}.")
    if result:
        lines.append(f"Reproduce: {result['command']}")
    return "\n".join([" ".join(lines[:2]), *lines[2:], "Steps:", *(f"  {_step(s)}" for s in steps)])
