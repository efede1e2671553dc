"""Pure table building for `compare`: result rows in, DataFrames and Markdown out
(see stats.py for how repeats are aggregated). Nothing here prints or imports torch."""

from __future__ import annotations

import json
import math
from pathlib import PurePath

import numpy as np
import pandas as pd
from tabulate import tabulate

from ..errors import StbenchError
from ..store.rows import PHASE_COLUMNS, TEXT_COLUMNS
from .fit import fit_table
from .machines import labels
from .scaling import scaling as scaling_of
from .stats import ci95, format_cell, format_number, ratio_text, show

CELL_KEYS = ["strategy", "world_size", "nodes", "batch_size", "epochs"]
PHASES = list(PHASE_COLUMNS)


def frame(rows: list[dict]) -> pd.DataFrame:
    """Rows from one or more runs.csv files as a typed DataFrame with a hardware `label`.

    The label names the hardware (`EPYC (2 cores)`, `T4`) and is unique per machine
    fingerprint (report.machines), so two machines are never pooled. Workload parameters that
    vary become `p.<name>` columns, integers kept integers and data paths shown by file name.
    """
    if not rows:
        raise StbenchError("no result rows to compare")
    df = pd.DataFrame(rows)
    if "nodes" not in df:  # rows from before multi-node runs
        df["nodes"] = 1
    for col in df.columns:
        if col not in TEXT_COLUMNS and col != "study":  # study: the result folder a row came from
            df[col] = pd.to_numeric(df[col], errors="coerce")
    df["label"] = labels(df)
    params = [json.loads(p) if isinstance(p, str) and p else {} for p in df["params"]]
    for name in dict.fromkeys(k for p in params for k in p):
        column_values = param_column([p.get(name) for p in params], df.index)
        if column_values.astype(str).nunique(dropna=False) > 1:
            df[f"p.{name}"] = column_values
    return df


def param_column(values: list, index) -> pd.Series:
    """One parameter over the rows: integers as a nullable integer column (so 400000 never
    prints as 400000.0 where an older row lacks the parameter), paths by their file name."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.Series(pd.array(values, dtype="Int64"), index=index)
    if present and all(isinstance(v, str) for v in present):
        return pd.Series(portable(values), index=index, dtype=object)
    return pd.Series(values, index=index, dtype=object)


def portable(values: list) -> list:
    """Data paths by file name (a machine's folders are not part of what ran), unless two
    different paths share a name."""
    paths = {v for v in values if isinstance(v, str) and ("/" in v or "\\" in v)}
    names = {PurePath(v).name for v in paths}
    if len(names) < len(paths):
        return values
    return [PurePath(v).name if v in paths else v for v in values]


def hardware_order(df: pd.DataFrame) -> dict[str, tuple]:
    """Column order of the hardware axis: CPUs first (the usual baseline), then GPUs, by name."""
    return {label: (not str(dev).startswith("cpu"), label) for label, dev in zip(df["label"], df["device"])}


def keys_of(df: pd.DataFrame) -> list[str]:
    return ["label", *CELL_KEYS, *sorted(c for c in df.columns if c.startswith("p."))]


def summarize(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per workload x cell: ok values of `metric`, their median, interval and status."""
    if metric not in df.columns:
        raise StbenchError(f"unknown metric {metric!r}; valid: wall_s, samples_per_s, epoch_s, train_s, "
                           "data_s, h2d_s, compute_s, sync_s, eval_s, peak_rss_mb, peak_gpu_mb, val_value, …")
    keys = ["workload", *keys_of(df)]
    out = []
    for key, group in df.groupby(keys, dropna=False, sort=True):
        ok = group[group["status"] == "ok"][metric].dropna().tolist()
        statuses = sorted(set(group["status"]) - {"ok"})
        lo, hi = ci95(ok)
        out.append({**dict(zip(keys, key)), "n": len(ok), "n_all": len(group), "values": ok,
                    "median": float(np.median(ok)) if ok else math.nan, "lo": lo, "hi": hi,
                    "status": "/".join(statuses) if statuses else "ok"})
    summary = pd.DataFrame(out)
    for k in keys:  # rebuilt from dicts, an integer column with a gap would turn float
        summary[k] = summary[k].astype(df[k].dtype)
    return summary


def column(name: str, keys: list[str]) -> str:
    """The frame's column for a name the user typed: device -> label, a parameter -> p.<name>."""
    for candidate in ("label" if name == "device" else name, f"p.{name}"):
        if candidate in keys:
            return candidate
    shown = ["device" if k == "label" else k.removeprefix("p.") for k in keys]
    raise StbenchError(f"cannot pivot on {name!r}; valid: {', '.join(shown)}")


def _varying(s: pd.DataFrame, keys: list[str]) -> list[str]:
    return [k for k in keys if s[k].astype(str).nunique() > 1]


def pivot(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
          baseline: tuple[str, str] | None = None, first_is_baseline: bool = False) -> dict[str, pd.DataFrame]:
    """Per workload: a table of formatted cells, `rows` down (plus any other axis that
    varies), `cols` across, and a "<col> vs <baseline>" column per non-baseline column. The
    baseline is the column `baseline` names or, with first_is_baseline, the first column."""
    all_keys = keys_of(df)
    rows, cols = column(rows, all_keys), column(cols, all_keys)
    s = summarize(df, metric)
    order = hardware_order(df)
    out = {}
    for workload, w in s.groupby("workload", sort=True):
        index = [k for k in _varying(w, all_keys) if k not in (rows, cols)] + [rows]
        values = list(dict.fromkeys(w.sort_values(cols)[cols]))
        if cols == "label":
            values.sort(key=order.get)
        base = _baseline(baseline, values, cols, all_keys, df) if baseline else None
        if first_is_baseline and not baseline and len(values) > 1:
            base = values[0]
        out[workload] = _table(w, index, cols, values, base, metric)
    return out


def _baseline(baseline: tuple[str, str], values: list, cols: str, all_keys: list[str], df: pd.DataFrame):
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
    return keyed(pd.DataFrame(lines).rename(columns={"label": "device"}), len(index))


def phase_shares(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Where the time went: median share of each phase in train + eval time, per cell."""
    ok = df[df["status"] == "ok"].copy()
    if ok.empty:
        return {}
    total = ok[PHASES].sum(axis=1)
    for p in PHASES:
        ok[p] = ok[p] / total
    out = {}
    for workload, w in ok.groupby("workload", sort=True):
        keys = _varying(w, keys_of(df)) or ["label"]
        agg = w.groupby(keys, sort=True, dropna=False)[[*PHASES, "samples_per_s"]].median().reset_index()
        for k in keys:
            agg[k] = [show(v) for v in agg[k]]
        for p in PHASES:
            agg[p] = [f"{100 * v:.1f}%" for v in agg[p]]
        agg["samples_per_s"] = [format_number(v) for v in agg["samples_per_s"]]
        out[workload] = keyed(agg.rename(columns={"label": "device", **{p: p[:-2] for p in PHASES}}), len(keys))
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


def fold_pairs(heading: str, width: int) -> str:
    """A heading of key=value pairs folded between pairs to fit width, never inside a value
    (a value may hold spaces: "EPYC (2 cores)")."""
    lines: list[str] = []
    for pair in heading.split(", "):
        if lines and len(lines[-1]) + 2 + len(pair) < width:  # < : room for the comma that ends a line
            lines[-1] += f", {pair}"
        else:
            lines.append(pair)
    return ",\n".join(lines)


def section(title: str, table: pd.DataFrame, width: int | None = None) -> str:
    """A titled Markdown table; with a width, split (never cut) to fit it (report.fit)."""
    if width is None:
        return f"{title}\n\n{markdown(table)}"
    parts = [title]
    for heading, piece in fit_table(table, width, markdown):
        parts.append((f"{fold_pairs(heading, width)}\n\n" if heading else "") + markdown(piece))
    return "\n\n".join(parts)


def report(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
           baseline: tuple[str, str] | None = None, width: int | None = None) -> str:
    """The whole compare output as Markdown; `width` fits a terminal (see report.fit)."""
    from .memory import memory_tables

    parts = []
    main, phases, scale = pivot(df, metric, rows, cols, baseline), phase_shares(df), scaling(df)
    memory = memory_tables(df, keys_of, _varying)
    for workload, table in main.items():
        parts.append(section(f"## {workload}: {metric} (median ± 95% CI half-width over repeats)", table, width))
        if workload in phases:
            parts.append(section(f"### {workload}: where the time went (share of train + eval)", phases[workload], width))
        if workload in scale:
            parts.append(section(f"### {workload}: data-parallel scaling against the smallest world", scale[workload], width))
        if workload in memory:
            parts.append(section(f"### {workload}: where the memory went (MiB per rank, median)", memory[workload], width))
    return "\n\n".join(parts) + "\n"
