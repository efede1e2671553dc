"""Findings of the studies that ask what a setting costs: memory against throughput (strategies,
checkpointing, any other setting), what a larger batch buys (samples/s per doubling, the knee),
the fixed and per-epoch cost of a run, and a study of one cell (pure: a study's rows in, one or
two sentences and the table behind them out; how memory and step time grow with the problem's
size is scaling.py's)."""

from __future__ import annotations

import math

import pandas as pd

from ..comparison import wins_from
from .cells import (
    Cell,
    Fit,
    cells,
    contrast,
    differs,
    fit_line,
    interval,
    one_run,
    paired_rounds,
)
from .labels import format_number
from .model import HARDWARE, SIZES, Key, axes, columns, first_axes, name_of
from .tables import SPREAD, cells_table, pivot, pivot_title

SPS = "samples/s"
FIGURE = [("samples_per_s", SPS)]
PARTS = ("param_mb", "grad_mb", "optim_state_mb", "activation_peak_mb")


def peak_memory(s: pd.DataFrame) -> tuple[pd.Series, str]:
    """The process's peak memory and its name: the GPU's peak where one was measured, else RSS."""
    if s["peak_gpu_mb"].notna().any():
        return s["peak_gpu_mb"], "peak GPU memory"
    return s["peak_rss_mb"], "peak RSS"


def rank_memory(s: pd.DataFrame) -> tuple[pd.Series, str]:
    """Memory per rank as a strategy changes it: the GPU's peak, else the parameters, gradients,
    optimizer state and activation peak a rank holds (counted where the rows have them: a CPU
    process's RSS hides them under the data and the runtime), else the peak RSS."""
    if not s["peak_gpu_mb"].notna().any() and s["param_mb"].notna().any():
        return s[list(PARTS)].sum(axis=1, min_count=1), "model state + activations"
    return peak_memory(s)


def _others(s: pd.DataFrame, *left_out: str) -> list[Key]:
    return [k for k in axes(s) if k != HARDWARE and k.name not in left_out]


def tradeoff(s: pd.DataFrame) -> str:
    """The cell that holds the least memory per rank against the fastest (or, where that is the
    fastest too, against the one that holds the most); where memory hardly differs, the fastest
    cell against the slowest."""
    keys = _others(s)
    mem, measure = rank_memory(s)
    speed = {c.key: c for c in cells(s, "samples_per_s", keys)}
    memory = [c for c in cells(s.assign(mem_mb=mem), "mem_mb", keys) if c.key in speed]
    if len(speed) < 2:
        return "Fewer than two cells finished: nothing to compare."
    fastest = max(speed.values(), key=lambda c: c.median)
    if len(memory) < 2 or not max(c.median for c in memory) > 1.1 * min(c.median for c in memory):
        slowest = min(speed.values(), key=lambda c: c.median)
        same = f"; {measure} within 10% across cells" if memory else ""
        said = contrast(slowest, fastest, amounts=False, note=False)
        pair = (
            f"the fastest, {fastest.name} ({fastest.amount(SPS)}), and the slowest, "
            f"{slowest.name} ({slowest.amount(SPS)})"
        )
        lead = (
            f"No significant difference in samples/s between {pair}"
            if said.startswith("no significant")
            else f"Fastest: {fastest.name} ({fastest.amount(SPS)}), {said} than the slowest, "
            f"{slowest.name} ({slowest.amount(SPS)})"
        )
        return f"{lead}{same}{_once(fastest, slowest)}." + _data_note(s, keys)
    least = min(memory, key=lambda c: c.median)
    ref = (
        next(c for c in memory if c.key == fastest.key)
        if least.key != fastest.key
        else max(memory, key=lambda c: c.median)
    )
    than = f"the fastest cell, {ref.name}" if ref.key == fastest.key else ref.name
    held = contrast(
        ref, least, higher_is_better=False, words=("less", "more"), amounts=False, note=False
    )
    cost = contrast(speed[ref.key], speed[least.key], amounts=False, note=False)
    return (
        f"{least.name} holds the least memory per rank, {least.amount('MiB')} {measure}: "
        f"{held} than {than} ({ref.amount('MiB')}); in samples/s it is {cost} "
        f"({speed[least.key].amount()} vs {speed[ref.key].amount(SPS)})"
        f"{_once(least, ref)}."
    ) + _data_note(s, keys)


def _once(*shown) -> str:
    return "; one run per cell: no interval" if one_run(*shown) else ""


def _data_note(s: pd.DataFrame, keys: list[Key]) -> str:
    """Where the data held in memory differs by more than 10% between cells, the extremes."""
    data = cells(s, "data_mb", keys)
    if len(data) < 2:
        return ""
    lo, hi = min(data, key=lambda c: c.median), max(data, key=lambda c: c.median)
    if not hi.median > 1.1 * lo.median:
        return ""
    return (
        f" Data in memory: {lo.amount('MiB')} ({lo.name}) against {hi.amount('MiB')} ({hi.name})."
    )


def tradeoff_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    mem, measure = rank_memory(s)
    figures = [("mem_mb", f"{measure} MiB"), ("samples_per_s", SPS)]
    if s["data_mb"].nunique() > 1:
        figures.append(("data_mb", "data MiB"))
    title = f"memory and samples/s per cell ({SPREAD})"
    return title, cells_table(s.assign(mem_mb=mem), axes(s), figures)


def batch(s: pd.DataFrame) -> str:
    """Samples/s from the smallest to the largest batch, and the knee: the first batch from which
    every doubling gains less than KNEE_GAIN samples/s, told by the rounds where they can tell
    it."""
    sweep = cells(s, "samples_per_s", [Key("batch_size", "batch_size")])
    if len(sweep) < 2:
        return "Fewer than two batch sizes finished: no sweep to state."
    first, last = sweep[0], sweep[-1]
    text = (
        f"Samples/s goes from {first.amount()} at batch {first.key[0]} to {last.amount()} at "
        f"batch {last.key[0]} ({contrast(first, last, amounts=False)})."
    )
    knee = _knee(sweep)
    if knee is None:
        return text + (
            f" Every doubling up to batch {last.key[0]} gains 10% or more: no knee in this range."
        )
    gain = _gain_per_doubling(knee, last)
    said = f"from there to batch {last.key[0]} a doubling gains {100 * gain:.1f}%"
    p = paired_rounds(knee, last)
    if p is None:  # one run a cell (the sentence before says so), or no rounds to pair
        return text + f" The knee is at batch {knee.key[0]}: {said} (< 10%)."
    lo, hi = (100 * _per_doubling(r, knee, last) for r in p[1:3])
    band = f"95% CI {lo:.1f}% to {hi:.1f}%"
    if hi < 100 * KNEE_GAIN:
        return text + f" The knee is at batch {knee.key[0]}: {said} ({band}), under 10%."
    return text + (
        f" The knee looks to be at batch {knee.key[0]} ({said}), but the rounds cannot tell it "
        f"from a gain of 10% or more ({band}): more rounds (--rounds) could."
    )


KNEE_GAIN = 0.10  # a doubling of the batch that gains less buys little samples/s


def _gain_per_doubling(a: Cell, b: Cell) -> float:
    """b's samples/s over a's per doubling of the batch (the last key)."""
    return _per_doubling(b.median / a.median, a, b) if a.median > 0 else math.nan


def _per_doubling(ratio: float, a: Cell, b: Cell) -> float:
    """A ratio of b to a as the gain of each doubling of the batch (the last key) between them."""
    doublings = math.log2(float(b.key[-1]) / float(a.key[-1]))
    return ratio ** (1 / doublings) - 1 if doublings > 0 else math.nan


def _knee(sweep: list[Cell]) -> Cell | None:
    """The first batch from which every doubling to the next batch gains < KNEE_GAIN: a step
    that gains little followed by one that gains much (noise, or a second rise) is no knee."""
    gains = [_gain_per_doubling(a, b) for a, b in zip(sweep, sweep[1:])]
    for i, cell in enumerate(sweep[:-1]):
        if all(math.isfinite(g) and g < KNEE_GAIN for g in gains[i:]):
            return cell
    return None


def batch_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    keys = first_axes(s, "batch_size")
    order = [*keys[1:], keys[0]]  # the batch last: the row axis
    table = cells_table(s, order, FIGURE)
    gains, prev = {}, {}
    for c in cells(s, "samples_per_s", order):
        group = c.key[:-1]
        if group in prev:
            gain = _gain_per_doubling(prev[group], c)
            gains[c.shown] = f"{100 * gain:+.1f}%" if math.isfinite(gain) else ""
        prev[group] = c
    rows = table[table.attrs["keys"]].itertuples(index=False)
    table["per doubling"] = [gains.get(tuple(r), "") for r in rows]
    title = f"samples/s per batch size ({SPREAD}); per doubling: the gain over the batch before"
    return title, table


def epoch_fits(s: pd.DataFrame) -> list[tuple[str, Fit]]:
    """A least-squares line of wall time against epochs per setting (its name; the hardware
    among the settings where it varies), for each that finished at two or more epoch counts."""
    others = [k for k in axes(s) if k.name != "epochs"]
    rows = s[s["status"] == "ok"]
    groups = list(rows.groupby(columns(others), sort=False)) if others else [((), rows)]
    fits = [
        (name_of(others, k if isinstance(k, tuple) else (k,)), fit_line(g["epochs"], g["wall_s"]))
        for k, g in groups
    ]
    return [(n, f) for n, f in fits if f is not None]


def epoch_cost(s: pd.DataFrame) -> str:
    """The fixed and the per-epoch cost of a run: a least-squares line of wall time against
    epochs (per setting, the cheapest and dearest per epoch where settings vary)."""
    fits = epoch_fits(s)
    if not fits:
        return "No setting finished at two or more epoch counts: no per-epoch cost to state."
    if len(fits) == 1:
        label, f = fits[0]
        ci = "; ".join(
            p
            for p in (interval(*f.slope_ci, "s per epoch"), interval(*f.intercept_ci, "s fixed"))
            if p
        )
        return (
            f"Wall time = {format_number(f.intercept)} s fixed + {format_number(f.slope)} s "
            f"per epoch (least squares over {f.n} runs{'; ' + ci if ci else ''})."
        )
    cheap, dear = min(fits, key=lambda x: x[1].slope), max(fits, key=lambda x: x[1].slope)
    apart = cheap[1].slope_ci[1] < dear[1].slope_ci[0]
    return (
        f"Per epoch: {cheap[0]} costs least, {_cost(cheap[1])}; {dear[0]} most, "
        f"{_cost(dear[1])}"
        f"{'' if apart else ' (no significant difference: the 95% intervals overlap)'}."
    )


def _cost(f) -> str:
    ci = interval(*f.slope_ci)
    return (
        f"{format_number(f.slope)} s per epoch{' (' + ci + ')' if ci else ''} + "
        f"{format_number(f.intercept)} s fixed"
    )


def epochs_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    return pivot_title("wall_s"), pivot(s, "wall_s", "epochs", "device", missing_ok=True)


def single_cell(s: pd.DataFrame) -> str:
    """A study of one cell: its throughput, wall time and memory."""
    mem, measure = peak_memory(s)
    speed, wall = cells(s, "samples_per_s", []), cells(s, "wall_s", [])
    memory = cells(s.assign(mem_mb=mem), "mem_mb", [])
    if not speed:
        return f"No run finished ({'/'.join(sorted(set(s['status'])))})."
    n = len(speed[0].values)
    parts = [
        speed[0].amount(SPS),
        f"{wall[0].amount('s')} wall" if wall else "",
        f"{memory[0].amount('MiB')} {measure}" if memory else "",
    ]
    return f"One cell, {n} run{'s' if n > 1 else ''}: " + ", ".join(p for p in parts if p) + "."


def single_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    mem, measure = peak_memory(s)
    figures = [("samples_per_s", SPS), ("wall_s", "wall s"), ("mem_mb", f"{measure} MiB")]
    return f"the cell ({SPREAD})", cells_table(s.assign(mem_mb=mem), [], figures)


def crossover_sentence(s: pd.DataFrame, base: str, label: str, keys: tuple[Key, ...]) -> str:
    """In a device study that varies a size (a size parameter, else the batch) on both
    hardware: the size from which `label`'s samples/s is significantly above `base`'s at every
    larger one, or that it never or always is (each side's fastest cell at each size)."""
    sizes = [k for k in keys if k.column in SIZES] or [k for k in keys if k.name == "batch_size"]
    if not sizes:
        return ""
    a, b = (_by_size(s[s["label"] == x], keys, sizes[0]) for x in (base, label))
    both = [v for v in a if v in b]
    if len(both) < 2:
        return ""
    wins = [differs(a[v], b[v]) and b[v].median > a[v].median for v in both]
    first, last, name = both[0], both[-1], sizes[0].name

    def at(v: str) -> str:
        return f"at {name}={v}: {contrast(a[v], b[v], unit=SPS)}"

    start = wins_from(wins)
    if start == 0:
        return f" {label} wins over {base} at every {name} from {first} to {last} ({at(first)})."
    if start is None:
        span = f"{name} from {first} to {last}"
        return f" {label} never wins over {base} significantly for {span} ({at(last)})."
    on = f", and at every larger {name} up to {last}" if both[start] != last else " (the largest)"
    return f" {label} starts to win over {base} {at(both[start])}{on}; {at(both[start - 1])}."


def _by_size(rows: pd.DataFrame, keys: tuple[Key, ...], size: Key) -> dict[str, Cell]:
    """The fastest cell at each value of `size`, in its natural order."""
    out: dict[str, Cell] = {}
    for c in cells(rows, "samples_per_s", [size, *(k for k in keys if k != size)]):
        if c.shown[0] not in out or c.median > out[c.shown[0]].median:
            out[c.shown[0]] = c
    return out
