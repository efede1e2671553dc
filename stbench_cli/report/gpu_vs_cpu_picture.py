"""The picture of a gpu-vs-cpu answer (report/gpu_vs_cpu.py holds its sentences and table): the
advantage (x) against the size on log axes, each measured line with its 95% band, parity dashed,
the crossover dotted, each GPU's predicted gain a thin hollow line of its own. Pure: a study's
frame in, a PNG out (matplotlib loaded only when a picture is drawn).
"""

from __future__ import annotations

import math
import textwrap

import pandas as pd

from ..comparison import number
from .gpu_vs_cpu import (
    Point,
    at_size,
    cpu_name,
    crossover,
    gpu_name,
    has_gpu,
    points,
    unit_of,
    whole,
)


def _ticks(low: float, high: float) -> list[float]:
    """Ratios to mark on a log axis from low to high: the finest of these mantissas x 10^k that
    puts at most 8 marks on it (at least the one at 1x)."""
    for mantissas in (
        (1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2, 2.5, 3, 4, 5, 6, 7, 8, 9),
        (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9),
        (1, 2, 5),
        (1,),
    ):
        found = [m * 10.0**e for e in range(-3, 5) for m in mantissas if low <= m * 10.0**e <= high]
        if len(found) <= 8:
            return found or [1.0]
    return found


def figure(s: pd.DataFrame, workload: str, predicted: pd.DataFrame | None = None):
    """The advantage (x) against the size: one line against the tuned CPU, one against the CPU at
    its defaults, each with its 95% band; the crossover marked; each GPU's predicted gain over
    the CPU's best (its estimate, `predicted`: predicted.csv) a line of its own, marked so."""
    from .plotting import Picture, caption, look, png

    found = [p for p in points(s) if math.isfinite(p.count) and math.isfinite(p.vs_tuned.value)]
    if len(found) < 2:
        return None
    import matplotlib.pyplot as plt

    gpu, unit, cpu = has_gpu(s), unit_of(s), cpu_name(s)
    fig, ax = plt.subplots(figsize=(6.4, 4.6), layout="constrained")
    ax.grid(True, alpha=0.3)
    lines = [
        (
            "vs_tuned",
            f"against the tuned {cpu}" if gpu else "against the CPU at its defaults",
        )
    ]
    if gpu:
        lines.append(("vs_default", f"against the {cpu} at its defaults"))
    for i, (attr, label) in enumerate(lines):
        pts = [(p.count, getattr(p, attr)) for p in found if getattr(p, attr) is not None]
        x = [c for c, _ in pts]
        y = [r.value for _, r in pts]
        ax.plot(x, y, label=label, linewidth=1.8, **look(i))
        banded = [(c, r) for c, r in pts if r.low is not None]
        if banded:
            ax.fill_between(
                [c for c, _ in banded],
                [r.low for _, r in banded],
                [r.high for _, r in banded],
                color=look(i)["color"],
                alpha=0.18,
                linewidth=0,
            )
    guessed = _predicted_lines(ax, predicted, found, len(lines))
    ax.axhline(1.0, color="#555555", linewidth=1, linestyle="--")
    start = crossover(found)
    if start is not None:
        ax.axvline(start.count, color="#D55E00", linewidth=1.2, linestyle=":")
        # below parity, beside where it starts to pay: no measured point lies there (every
        # size from the crossover on is above 1x), so the words never cross a line; on its
        # right, or its left where it starts at the last size (on the right they left the
        # picture there, and the layout shrank the axes to keep them)
        last = start.count >= max(p.count for p in found)
        ax.annotate(
            f"{'pays' if gpu else 'faster'} from {at_size(start, unit)}",
            (start.count, 1.0),
            xytext=(-6 if last else 6, -4),
            textcoords="offset points",
            ha="right" if last else "left",
            va="top",
            fontsize=8,
            color="#D55E00",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    if start is not None:  # room under parity for those words: a tenth of the axes' height
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0.8, high ** (-1 / 9)), high)
    ax.minorticks_off()
    ax.set_xticks([p.count for p in found])
    ax.set_xticklabels([whole(p.count) for p in found], fontsize=8)
    ticks = _ticks(*ax.get_ylim())
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{t:g}x" for t in ticks], fontsize=8)
    ax.set_xlabel(unit or "size")
    ax.set_ylabel(
        "GPU's samples/s over the CPU's"
        if gpu
        else "samples/s, times the other's"
        if guessed
        else "samples/s over the defaults'"
    )
    who = (
        f"{gpu_name(s).removeprefix('The ')} over the {cpu}"
        if gpu
        else f"{cpu}, best configuration over its defaults"
    )
    also = "\nand each GPU's predicted gain over the CPU's best" if guessed and not gpu else ""
    # wrapped: centred over the axes, a line wider than the figure lost its start
    ax.set_title(textwrap.fill(f"{workload}: {who}, by size", 72) + also, fontsize=10)
    # below the axes: inside, wherever "best" put it, it covered a line or the parity line
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    said = caption(
        "samples/s of the GPU's fastest cell over each CPU cell at every size"
        if gpu
        else "samples/s of the CPU's best configuration besides its defaults over its defaults "
        "at every size",
        "bands: 95% intervals of the per-round ratios",
        f"dashed: parity; dotted: where it starts to pay ({at_size(start, unit)})"
        if start
        else "dashed: parity",
        *(
            [
                "hollow markers, thin dashes: PREDICTED, not measured: each GPU's estimated "
                "gain over the CPU's best (predicted.csv; no interval)"
            ]
            if guessed
            else []
        ),
    )
    return Picture(f"{workload}-gpu-vs-cpu", f"{workload}: advantage by size", said, png(fig))


def _predicted_lines(ax, predicted: pd.DataFrame | None, found: list[Point], first: int) -> bool:
    """Each GPU's estimated gain over the CPU's best at the measured sizes, drawn thin, dashed
    and hollow (never a band: a prediction has no interval); whether any was drawn."""
    from .plotting import look

    if predicted is None or predicted.empty:
        return False
    counts = {str(p.size): p.count for p in found}
    # cards whose predictions coincide (a host-bound step is the same on every card) share one
    # line, named for all of them: otherwise the last drawn hides the others
    lines: dict[tuple, list[str]] = {}
    for gpu, rows in predicted.groupby("gpu", sort=False):
        pts = tuple(
            (counts[str(r["size"])], round(float(r["estimated_gain"]), 2))
            for r in rows.to_dict("records")
            if str(r["size"]) in counts and (number(r.get("estimated_gain")) or 0) > 0
        )
        if pts:
            lines.setdefault(pts, []).append(str(gpu))
    for i, (pts, names) in enumerate(lines.items()):
        style = look(first + i)
        ax.plot(
            [c for c, _ in pts],
            [g for _, g in pts],
            label=f"{' = '.join(names)}: predicted over the CPU's best (not measured)",
            linewidth=0.9,
            linestyle=(0, (4, 2)),
            marker="o",
            markerfacecolor="none",
            color=style["color"],
        )
    return bool(lines)
