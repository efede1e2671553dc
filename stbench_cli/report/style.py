"""How every stbench figure looks: a colour-blind-safe palette, markers that tell lines apart
in grey print too, panels laid out in a grid, legends below the plot, PNG bytes out."""

from __future__ import annotations

import io
import math
import textwrap

import matplotlib

matplotlib.use("Agg")  # headless: no display is ever needed
import matplotlib.pyplot as plt  # noqa: E402

# Okabe & Ito's palette (safe for the common colour-vision deficiencies), the yellow last
# because it reads poorly on white.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
PHASE_COLOURS = {"data": "#E69F00", "h2d": "#56B4E9", "compute": "#0072B2", "sync": "#D55E00", "eval": "#009E73"}
DPI = 110


def look(i: int) -> dict:
    """Colour and marker of the i-th line of a figure."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[(i // len(PALETTE) + i) % len(MARKERS)]}


def grid(n: int, per_row: int = 2, size: tuple[float, float] = (5.2, 3.6)):
    """A figure of n panels, per_row across (constrained layout, so labels, titles and a
    legend below never overlap or fall off the edge); unused grid cells are removed."""
    cols = min(n, per_row)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.remove()
    for ax in flat[:n]:
        ax.grid(True, alpha=0.3)
    return fig, flat[:n]


def legend_below(fig, entries: dict[str, object], title: str = "") -> None:
    """One legend for the whole figure, below the panels (names can be long)."""
    if not entries:
        return
    fig.legend(list(entries.values()), list(entries.keys()), loc="outside lower center",
               ncol=len(entries) if sum(map(len, entries)) <= 90 else 1 if max(map(len, entries)) > 45 else 2,
               frameon=False, fontsize=8, title=textwrap.fill(title, int(fig.get_figwidth() * 15)) or None,
               title_fontsize=8)


def png(fig) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def from_zero(ax) -> None:
    """Start the y axis at zero, with a little room so points on zero stay whole."""
    top = ax.get_ylim()[1]
    ax.set_ylim(-0.03 * top, top)
