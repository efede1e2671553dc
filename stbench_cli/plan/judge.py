"""How `stbench tune` judges one step: every value tried against the step's reference
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

from dataclasses import replace

from ..comparison import (
    ALL_STEPS,
    CAP,
    LEARNING,
    QUALITY,
    SPEED,
    SPS,
    TTT,
    Verdict,
    by_round,
    column_median,
    interval_text,
    looks_equal,
    measure_of,
)
from ..comparison import (
    judge as compare,
)
from ..store.rows import Run
from .levers import BATCH, Lever

QUALITY_TOLERANCE = 0.05  # a faster value that learns more than 5% worse is not kept
__all__ = ["ALL_STEPS", "SPS", "TTT", "QUALITY", "Verdict", "judge_step", "value_of", "finding"]


def value_of(row: Run, lever: str) -> object:
    """The lever's value in a run."""
    return row.batch_size if lever == BATCH else row.params[lever]


def lever_measure(lever: Lever | None, rows: list[Run]) -> str:
    """What a step's values are judged on (comparison.measure_of's rule for the lever)."""
    return measure_of(rows, LEARNING if lever is not None and lever.quality_judged else SPEED)


def judge_step(
    lever: Lever, rows: list[Run], reference: object
) -> tuple[str, list[Verdict], object]:
    """(measure, a verdict per value tried, the value kept) of one step's rows: a value is kept
    where it is significantly better, round by round, and learns no worse than the reference
    by more than QUALITY_TOLERANCE."""
    measure = lever_measure(lever, rows)
    groups: dict[object, list[Run]] = {}
    for r in rows:
        groups.setdefault(value_of(r, lever.name), []).append(r)
    ref_rows = groups.get(reference, [])
    ref, ref_quality = by_round(ref_rows, measure), column_median(ref_rows, QUALITY)
    verdicts = []
    for value, group in groups.items():
        v = compare(value, measure, ref, by_round(group, measure))
        failed = [f"{r['status']}: {r['reason']}" for r in group if r["status"] != "ok"]
        quality = column_median(group, QUALITY)
        note = f"{len(failed)} of {len(group)} runs not ok ({failed[0]})" if failed else ""
        if value != reference and v.better and measure != QUALITY and _worse(quality, ref_quality):
            note = (
                f"faster, but its validation metric {quality:.4g} is more than "
                f"{QUALITY_TOLERANCE:.0%} worse than {ref_quality:.4g}"
            )
        verdicts.append(
            replace(
                v,
                new=column_median(group, measure) or v.new,
                note=note,
                samples_per_s=column_median(group, SPS),
                quality=quality,
            )
        )
    keep = [v for v in verdicts if v.subject != reference and v.better and not v.note]
    kept = max(keep, key=lambda v: v.ratio).subject if keep else reference
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
    return f"{_x(d['ratio'])}, 95% interval {interval_text(d['low'], d['high'])}"


def _changed(result: dict) -> list[str]:
    best, base = result["best"], result["baseline"]
    return [f"{k}={best[k]} (torch's default: {base[k]})" for k in best if best[k] != base[k]]


def _gain_sentence(result: dict) -> str:
    gain = result.get("gain")
    if not gain:
        return "The confirming step has no ok rows: no gain can be stated."
    sps = gain["samples_per_s"]
    # slower where the interval lies below 1: a search step that ran contended can keep a value
    # the confirming step, side by side, shows slower (threads=1 kept at 2.74x, then 0.92x,
    # 0.85-0.99x, on the 2-vCPU VM), and "not significantly different" said the opposite
    slower = sps.get("high") is not None and sps["high"] < 1
    if sps.get("low") and sps["low"] > 1:
        verdict = "significantly faster than"
    elif slower:
        verdict = "significantly slower than"
    elif sps.get("low"):
        verdict = "not significantly different from"
    else:
        verdict = "measured once against"
    what = MEASURES.get(sps.get("measure", "samples_per_s"), "samples/s")
    text = (
        f"In the confirming step ({sps['rounds']} rounds side by side) it was {verdict} "
        f"torch's defaults: {_interval(sps)} their {what} ({sps['best']:,.0f} vs "
        f"{sps['baseline']:,.0f})" + (": keep torch's defaults" if slower else "")
    )
    ttt = gain.get("time_to_target_s")
    if ttt and ttt.get("low") and ttt["low"] > 1:
        text += f"; it reached the target {_interval(ttt)} sooner"
    elif ttt:  # the rounds where both reached it
        text += f"; time to target: no significant difference ({_interval(ttt)})"
    quality = gain.get("quality") or {}
    if quality.get("best") is not None and quality.get("base") is not None:
        text += f"; validation metric {quality['best']:.4g} vs {quality['base']:.4g}"
    if gain.get("contended"):
        text += f"; {gain['contended']} of its {gain.get('cells', 0)} cells ran contended"
    return text + "."


def concluded(v: dict) -> bool:
    """A value's verdict settles it: its interval excludes 1, or lies within the questions'
    margin (the two look equal)."""
    low, high = v.get("low"), v.get("high")
    if low is None or high is None:
        return False
    return low > 1 or high < 1 or looks_equal(low, high)


def _open(v: dict) -> str:
    """Why a value's verdict is not a conclusion, and what would make it one."""
    if v.get("low") is None:
        return "open: a second round would give it an interval"  # its ratio says one round
    wide = "wider than 0.5-2x; " if v["high"] / v["low"] > 4 else ""  # says next to nothing
    needs = v.get("needs")  # (a tune.json from before it was kept has none)
    if needs is None:
        return f"open: {wide}more rounds (--rounds) could settle it"
    # settled either way: apart, or within the margin (the engine's rule, plan/pairs.py's more)
    needs = min(needs, v.get("to_equal") or needs)
    if 0 < needs < CAP:
        return f"open: {wide}~{needs} rounds could settle it"
    return f"open: {wide}no count of rounds would at the spread seen"


def _unmeasured(s: dict) -> list:
    """A step's values that have no verdict: its time ended first."""
    measured = {v["value"] for v in s.get("verdicts", ())}
    return [x for x in s.get("values", ()) if x not in measured]


def _unsettled(s: dict) -> list:
    """A searched step's values not settled against its reference: open, or never measured."""
    tried = [v for v in s.get("verdicts", ()) if v["value"] != s["reference"]]
    return [v for v in tried if not concluded(v) and not v["note"]] + _unmeasured(s)


def step_line(s: dict, brief: bool = False) -> str:
    """A step in a line: what it kept, each value's ratio and interval; why a value is still
    open, unless `brief` (the head says "not concluded" either way)."""
    if not s.get("verdicts"):
        return f"{s['lever']}: {s.get('note') or 'not searched'}"
    tried = [v for v in s["verdicts"] if v["value"] != s["reference"]]
    parts = [
        f"{s['lever']}={v['value']}: {_interval(v)}"
        + (f" ({v['note']})" if v["note"] else "")
        + ("" if concluded(v) or v["note"] else f" ({_open(v)})")
        for v in tried
    ]
    if brief:  # each value's ratio and interval, short: "=1 0.76x (0.72-0.79x)"
        parts = [
            f"={v['value']} {_x(v.get('ratio'))}"
            + (f" ({interval_text(v['low'], v['high'])})" if v.get("low") is not None else "")
            + (" (not ok)" if v["note"] else "")
            for v in tried
        ]
    unmeasured = _unmeasured(s)
    parts += [f"{s['lever']}={x}: not measured in the step's time" for x in unmeasured]
    kept = s["kept"] != s["reference"]
    head = (
        f"{s['lever']} {s['reference']} -> {s['kept']} kept"
        if kept
        else f"{s['lever']} stays {s['reference']}" + (", not concluded" if _unsettled(s) else "")
    )
    if brief:
        return f"{head} [{', '.join(parts)}]"
    return f"{head} [{MEASURES.get(s['measure'], s['measure'])}: {'; '.join(parts)}]"


def finding(state: dict, brief: bool = False) -> str:
    """The tune's finding as plain text (a paragraph, then one line per step; `brief`: without
    what would settle each open value)."""
    spec, result, steps = state["spec"], state.get("result") or {}, state.get("steps", [])
    host = state.get("host", {})
    changed = _changed(result) if result else []
    windowed = [s for s in steps if s.get("window_s") and s.get("verdicts")]
    how = f"{spec['cell_s']:g} s of training per cell, {spec['repeats']} rounds per step"
    if windowed:  # a step of levers a running process switches: the questions' engine
        how = (
            f"{', '.join(s['lever'] for s in windowed)} in paired windows of "
            f"{windowed[0]['window_s']:g} s, rounds until each concludes within the budget; "
            f"other levers {how}"
        )
    head = f"{spec['workload']} on this CPU ({host.get('physical', '?')} physical cores, {how}): "
    if changed:
        head += f"the best configuration found changes {', '.join(changed)}."
    elif compared := [
        s for s in steps if any(v["value"] != s["reference"] for v in s.get("verdicts", ()))
    ]:
        # "the best found" only where every comparison settled; else the defaults stay, and
        # the head says how many steps left it open (their lines below say what would settle)
        open_ = sum(bool(_unsettled(s)) for s in compared)
        if len(compared) == 1:
            searched = "the step"
        elif open_ < len(compared):
            searched = f"{open_} of the {len(compared)} steps"
        else:
            searched = "both steps" if open_ == 2 else f"all {open_} steps"
        head += (
            f"torch's defaults stay: no value measured was significantly better, but "
            f"{searched} that compared a value with them did not conclude."
            if open_
            else "torch's defaults were the best configuration found."
        )
    else:  # no step measured a value besides its reference: nothing was compared
        head += "no value besides torch's defaults was measured, so nothing was compared."
    lines = [head, *([_gain_sentence(result)] if changed else [])]
    hit = sum(int(s.get("contended") or 0) for s in steps)
    if hit:
        total = sum(int(s.get("cells") or 0) for s in steps)
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
    return "\n".join(
        [" ".join(lines[:2]), *lines[2:], "Steps:", *(f"  {step_line(s, brief)}" for s in steps)]
    )
