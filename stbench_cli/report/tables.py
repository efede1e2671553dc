"""Pure table building for `compare` and the report: the study table in the published
layout, phase shares, scaling, and Markdown (rows are read into a frame by frame.py; stats.py
aggregates repeats). Nothing here prints or imports torch."""

from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from ..errors import StbenchError
from ..store.rows import PHASE_COLUMNS
from .frame import column, hardware_order, keys_of, summarize, varying
from .order import sort_natural
from .scaling import scaling as scaling_of
from .stats import format_cell, format_number, ratio_text, show

PHASES = list(PHASE_COLUMNS)
# What reading a chunked or remote source cost, beside the data phase's share (late columns:
# shown only where rows have them)
READ_COST = {"bytes_read": "MB read", "read_amplification": "read amplification", "first_batch_s": "first batch s"}


def pivot(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
          baseline: tuple[str, str] | None = None, first_is_baseline: bool = False,
          missing_baseline_ok: bool = False) -> dict[str, pd.DataFrame]:
    """Per workload: a table of formatted cells, `rows` down (plus any other axis that
    varies), `cols` across, and a "<col> vs <baseline>" column per non-baseline column. The
    baseline is the column `baseline` names or, with first_is_baseline, the first column."""
    all_keys = keys_of(df)
    rows, cols = column(rows, all_keys), column(cols, all_keys)
    s = summarize(df, metric)
    order = hardware_order(df)
    out = {}
    for workload, w in s.groupby("workload", sort=True):
        index = [k for k in varying(w, all_keys) if k not in (rows, cols)] + [rows]
        values = list(dict.fromkeys(w.sort_values(cols)[cols]))
        if cols == "label":
            values.sort(key=order.get)
        base = _baseline(baseline, values, cols, all_keys, df, missing_baseline_ok) if baseline else None
        if first_is_baseline and not baseline and len(values) > 1:
            base = values[0]
        out[workload] = _table(w, index, cols, values, base, metric)
    return out


def check_baseline(df: pd.DataFrame, cols: str, baseline: tuple[str, str]) -> None:
    """A --baseline must match a column of some study (each study without it just has no ratios)."""
    all_keys = keys_of(df)
    cols = column(cols, all_keys)
    _baseline(baseline, list(dict.fromkeys(df[cols])), cols, all_keys, df)


def _baseline(baseline: tuple[str, str], values: list, cols: str, all_keys: list[str], df: pd.DataFrame,
              missing_ok: bool = False):
    """The column a --baseline names: its exact label, or for the hardware axis the one
    column of that device kind (`device=cpu` when exactly one CPU is present)."""
    key, value = baseline
    if column(key, all_keys) != cols:
        raise StbenchError(f"--baseline must name the column axis ({cols if cols != 'label' else 'device'}), not {key}")
    matches = [v for v in values if str(v) == value]
    if not matches and cols == "label":
        kinds = dict(zip(df["label"], df["device"].astype(str)))
        matches = [v for v in values if kinds.get(v, "").split(":")[0] == value]
        if len(matches) > 1:
            raise StbenchError(f"--baseline {key}={value} matches several columns ({', '.join(matches)}); name one")
    if not matches:
        if missing_ok:  # a study that did not run the baseline has no ratio column
            return None
        raise StbenchError(f"--baseline {key}={value} matches no result; present: {', '.join(map(str, values))}")
    return matches[0]


def _table(w: pd.DataFrame, index: list[str], cols: str, values: list, base, metric: str) -> pd.DataFrame:
    lines = []
    for idx, g in w.groupby(index, sort=True, dropna=False):
        idx = idx if isinstance(idx, tuple) else (idx,)
        by_col = {r[cols]: r for _, r in g.iterrows()}
        line = {k: show(v) for k, v in zip(index, idx)}
        for v in values:
            line[show(v)] = format_cell(by_col[v]) if v in by_col else "-"
        if base is not None:
            for v in values:
                if v != base:
                    line[f"{show(v)} vs {show(base)}"] = ratio_text(metric, by_col.get(base), by_col.get(v))
        lines.append(line)
    table = pd.DataFrame(lines).rename(columns={"label": "device"})
    return keyed(sort_natural(table, list(table.columns[: len(index)])), len(index))


def phase_shares(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Where the time went: median share of each phase in train + eval time, per cell, and for
    a zarr or remote source what its read cost (MB fetched, amplification, time to first batch)."""
    ok = df[df["status"] == "ok"].copy()
    if ok.empty:
        return {}
    total = ok[PHASES].sum(axis=1)
    for p in PHASES:
        ok[p] = ok[p] / total
    out = {}
    for workload, w in ok.groupby("workload", sort=True):
        keys = varying(w, keys_of(df)) or ["label"]
        read = [c for c in READ_COST if c in w and w[c].notna().any()]  # rows of a zarr or remote source
        agg = w.groupby(keys, sort=True, dropna=False)[[*PHASES, "samples_per_s", *read]].median().reset_index()
        for k in keys:
            agg[k] = [show(v) for v in agg[k]]
        for p in PHASES:
            agg[p] = [f"{100 * v:.1f}%" for v in agg[p]]
        for c in ["samples_per_s", *read]:
            agg[c] = [format_number(v / 1e6 if c == "bytes_read" else v) for v in agg[c]]
        out[workload] = keyed(agg.rename(columns={"label": "device", **{p: p[:-2] for p in PHASES}, **READ_COST}),
                              len(keys))
    return out


def scaling(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Multi-process rows: the scaling study per world size and node count (see scaling.py)."""
    return {w: keyed(t, list(t.columns).index("world") + 1) for w, t in scaling_of(df, keys_of(df)).items()}


def keyed(table: pd.DataFrame, n_keys: int) -> pd.DataFrame:
    """Mark a table's first n_keys columns as its keys (what a narrow terminal keeps)."""
    table.attrs["keys"] = list(table.columns[:n_keys])
    return table


def markdown(table: pd.DataFrame) -> str:
    return tabulate(table, headers="keys", tablefmt="pipe", showindex=False, disable_numparse=True)


