"""A study's tables (pure: its frame in, a table of text out): the metric pivoted in the
published layout (rows down, hardware across, ratios against a baseline column), one line per
cell with chosen figures, where the time went, where the memory went, and Markdown.

Every table marks its key columns (`attrs["keys"]`: what a narrow terminal repeats, report.text)
and heads them by the keys' names. To add a column to a table, add it to the figures the table
is given (`cells_table`) or to PHASES / READ_COST / MEMORY below; to add a table, see view.py.
"""

from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from ..errors import StbenchError
from ..store.rows import PHASE_COLUMNS
from .cells import HIGHER_IS_BETTER, Cell, against, cells
from .labels import format_number, hardware_order, natural, show, sort_natural
from .model import HARDWARE, Key, axes, columns, find, keys_of

PHASES = list(PHASE_COLUMNS)
# What reading a chunked or remote source cost, beside the data phase's share (shown only
# where the rows have them)
READ_COST = {
    "bytes_read": "MB read",
    "read_amplification": "read amplification",
    "first_batch_s": "first batch s",
}
MEMORY = {
    "param_mb": "parameters",
    "grad_mb": "gradients",
    "optim_state_mb": "optimizer state",
    "activation_peak_mb": "activations (peak)",
}
SPREAD = "median ± 95% CI half-width over repeats"
FIRST = "first"  # a baseline: the first column (a table's others are held against it)
METRICS = (
    "wall_s, samples_per_s, epoch_s, train_s, data_s, h2d_s, compute_s, sync_s, eval_s, "
    "peak_rss_mb, peak_gpu_mb, val_value, …"
)


def heads(keys: list[Key], taken) -> list[str]:
    """The key columns' headings: each key's name, or its column where the table has a value
    of that name (a parameter `data` beside the data phase: `p.data`)."""
    return [k.column if k.name in taken else k.name for k in keys]


WORDS = {"wall_s": "wall time (s)"}  # a metric a reader knows by name rather than by column


def pivot_title(metric: str, baseline: str | None = None) -> str:
    title = f"{WORDS.get(metric, metric)} ({SPREAD})"
    return title + (", speedup against the first column" if baseline == FIRST else "")


def pivot(
    s: pd.DataFrame,
    metric: str = "wall_s",
    rows: str = "epochs",
    cols: str = "device",
    baseline: str | None = None,
    missing_ok: bool = False,
) -> pd.DataFrame:
    """`metric` per cell, `rows` down (after any other key the study varies), `cols` across,
    and a "<col> vs <baseline>" column per other column. `baseline` is "key=value" (a column's
    value, or for the hardware a device kind: device=cpu) or FIRST; a study without the named
    column has no ratios where `missing_ok`, else that is an error."""
    if metric not in s.columns:
        raise StbenchError(f"unknown metric {metric!r}; valid: {METRICS}")
    keys = keys_of(s)
    row, col = find(rows, keys), find(cols, keys)
    index = [k for k in axes(s) if k not in (row, col)] + [row]
    found = cells(s, metric, [*index, col], every=True)
    values = sorted(dict.fromkeys(c.key[-1] for c in found), key=_order(s, col))
    base = _baseline_column(baseline, values, col, s, missing_ok)
    by_index: dict[tuple, dict[str, Cell]] = {}
    for c in found:
        by_index.setdefault(tuple(show(v) for v in c.key[:-1]), {})[show(c.key[-1])] = c
    words = (
        ("faster", "slower")
        if metric.endswith("_s") or metric == "samples_per_s"
        else ("better", "worse")
    )
    names = heads(index, {show(v) for v in values})
    lines = []
    for idx, by_col in by_index.items():
        line = dict(zip(names, idx))
        line.update({show(v): by_col[show(v)].text() if show(v) in by_col else "-" for v in values})
        for v in values if base is not None else ():
            if show(v) != show(base):
                line[f"{show(v)} vs {show(base)}"] = against(
                    by_col.get(show(base)), by_col.get(show(v)), metric in HIGHER_IS_BETTER, words
                )
        lines.append(line)
    return keyed(pd.DataFrame(lines), len(index))


def _order(s: pd.DataFrame, col: Key):
    """Column order: the hardware CPUs first (the usual baseline), then GPUs, by name; any
    other key in natural order."""
    if col == HARDWARE:
        order = hardware_order(s)
        return lambda v: order.get(v, (True, str(v)))
    return natural


def parse_baseline(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise StbenchError(f"--baseline {text!r} is malformed; expected key=value, e.g. device=cpu")
    return key, value


def _baseline_column(
    baseline: str | None, values: list, col: Key, s: pd.DataFrame, missing_ok: bool
):
    """The column a baseline names: the first, its exact label, or for the hardware the one
    column of that device kind (`device=cpu` when exactly one CPU is present)."""
    if baseline is None:
        return None
    if baseline == FIRST:
        return values[0] if len(values) > 1 else None
    key, value = parse_baseline(baseline)
    if find(key, keys_of(s)) != col:
        raise StbenchError(f"--baseline must name the column axis ({col.name}), not {key}")
    matches = [v for v in values if show(v) == value]
    if not matches and col == HARDWARE:
        kinds = dict(zip(s["label"], s["device"].astype(str)))
        matches = [v for v in values if kinds.get(v, "").split(":")[0] == value]
        if len(matches) > 1:
            raise StbenchError(
                f"--baseline {baseline} matches several columns ({', '.join(matches)}); name one"
            )
    if not matches:
        if missing_ok:  # a study that did not run the baseline has no ratio column
            return None
        raise StbenchError(
            f"--baseline {baseline} matches no result; present: {', '.join(map(show, values))}"
        )
    return matches[0]


def check_baseline(frames: list[pd.DataFrame], cols: str, baseline: str) -> None:
    """A --baseline must match a column of some study (a study without it has no ratios)."""
    every = pd.concat(frames, ignore_index=True)
    col = find(cols, keys_of(every))
    values = sorted(dict.fromkeys(every[col.column].dropna()), key=_order(every, col))
    _baseline_column(baseline, values, col, every, missing_ok=False)


def cells_table(s: pd.DataFrame, keys: list[Key], figures: list[tuple[str, str]]) -> pd.DataFrame:
    """One line per cell (every status): its keys, then each figure (column, heading) as the
    median ± half-width of its ok runs (a cell with none: its status)."""
    keys = keys or [HARDWARE]
    by_figure = {col: {c.shown: c for c in cells(s, col, keys, every=True)} for col, _ in figures}
    names = heads(keys, {heading for _, heading in figures})
    lines = []
    for c in cells(s, None, keys):
        line = dict(zip(names, c.shown))
        for col, heading in figures:
            got = by_figure[col].get(c.shown, c)
            shown = "-" if got.status == "ok" else got.status  # no value: how it ended
            line[heading] = got.amount() if got.values else shown
        lines.append(line)
    return keyed(pd.DataFrame(lines), len(keys))


def medians(s: pd.DataFrame, keys: list[Key], figures: list[str]) -> pd.DataFrame:
    """Per cell (natural order), the median of each figure over its ok repeats, its keys as they
    are (a figure's columns)."""
    s = s[s["status"] == "ok"] if "status" in s else s
    groups = s.groupby(columns(keys), sort=False, dropna=False)[figures].median().reset_index()
    return sort_natural(groups, columns(keys))


def phase_shares(s: pd.DataFrame) -> pd.DataFrame | None:
    """Where the time went: each phase's median share of train + eval time per cell, samples/s,
    and for a chunked or remote source what reading it cost."""
    ok = s[(s["status"] == "ok") & (s[PHASES].sum(axis=1, min_count=1) > 0)].copy()
    if ok.empty:  # no run timed its phases
        return None
    ok[PHASES] = ok[PHASES].div(ok[PHASES].sum(axis=1), axis=0)
    keys = axes(ok) or [HARDWARE]
    read = [c for c in READ_COST if c in ok and ok[c].notna().any()]
    table = medians(ok, keys, [*PHASES, "samples_per_s", *read])
    taken = {p.removesuffix("_s") for p in PHASES} | {"samples_per_s", *READ_COST.values()}
    out = pd.DataFrame(
        {h: [show(v) for v in table[k.column]] for k, h in zip(keys, heads(keys, taken))}
    )
    for p in PHASES:
        # a phase no run of the cell timed (a window never evaluates) is "-", not "nan%"
        out[p.removesuffix("_s")] = [f"{100 * v:.1f}%" if pd.notna(v) else "-" for v in table[p]]
    for c in ["samples_per_s", *read]:
        scale = 1e6 if c == "bytes_read" else 1.0
        out[READ_COST.get(c, c)] = [format_number(v / scale) for v in table[c]]
    return keyed(out, len(keys))


def memory_cells(s: pd.DataFrame) -> tuple[list[Key], pd.DataFrame]:
    """The keys that vary and, per cell that counted its memory, the median MiB of each part
    per rank and its wall time (rows written before stbench counted memory have none)."""
    ok = s[(s["status"] == "ok") & s["param_mb"].notna()]
    keys = axes(s) or [HARDWARE]
    return keys, medians(ok, keys, [*MEMORY, "wall_s"]) if len(ok) else ok.iloc[0:0]


def memory_table(s: pd.DataFrame) -> pd.DataFrame | None:
    """Where the memory went: per cell, the median MiB per rank of each part, and wall time."""
    keys, table = memory_cells(s)
    if table.empty:
        return None
    taken = {*MEMORY.values(), "wall s"}
    out = pd.DataFrame(
        {h: [show(v) for v in table[k.column]] for k, h in zip(keys, heads(keys, taken))}
    )
    for col, heading in [*MEMORY.items(), ("wall_s", "wall s")]:
        out[heading] = [format_number(v) for v in table[col]]
    return keyed(out, len(keys))


def keyed(table: pd.DataFrame, n_keys: int) -> pd.DataFrame:
    """Mark a table's first n_keys columns as its keys (what a narrow terminal keeps)."""
    table.attrs["keys"] = list(table.columns[:n_keys])
    return table


def markdown(table: pd.DataFrame) -> str:
    return tabulate(table, headers="keys", tablefmt="pipe", showindex=False, disable_numparse=True)
