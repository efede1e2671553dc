"""Pure table building for `compare`: result rows in, DataFrames and Markdown out
(see stats.py for how repeats are aggregated). Nothing here prints or imports torch."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from tabulate import tabulate

from ..errors import StbenchError
from ..store.rows import PHASE_COLUMNS, TEXT_COLUMNS
from .scaling import scaling as scaling_of
from .stats import ci95, format_cell, format_number, ratio_text

CELL_KEYS = ["strategy", "world_size", "nodes", "batch_size", "epochs"]
PHASES = list(PHASE_COLUMNS)


def frame(rows: list[dict]) -> pd.DataFrame:
    """Rows from one or more runs.csv files as a typed DataFrame with a `label` per device.

    The same device name from several hosts (a CPU box and a GPU box both have `cpu`) is
    told apart as device@host. Workload parameters that vary become `p.<name>` columns.
    """
    if not rows:
        raise StbenchError("no result rows to compare")
    df = pd.DataFrame(rows)
    if "nodes" not in df:  # rows from before multi-node runs
        df["nodes"] = 1
    for col in df.columns:
        if col not in TEXT_COLUMNS:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    hosts = df.groupby("device")["host"].nunique()
    df["label"] = [d if hosts[d] <= 1 else f"{d}@{h}" for d, h in zip(df["device"], df["host"])]
    params = pd.DataFrame([json.loads(p) if isinstance(p, str) and p else {} for p in df["params"]], index=df.index)
    for name in params.columns:
        if params[name].astype(str).nunique() > 1:
            df[f"p.{name}"] = params[name]
    return df


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
    return pd.DataFrame(out)


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
          baseline: tuple[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """Per workload: a table of formatted cells, `rows` down (plus any other axis that
    varies), `cols` across, and a "<col> vs <baseline>" column per non-baseline column."""
    all_keys = keys_of(df)
    rows, cols = column(rows, all_keys), column(cols, all_keys)
    s = summarize(df, metric)
    out = {}
    for workload, w in s.groupby("workload", sort=True):
        index = [k for k in _varying(w, all_keys) if k not in (rows, cols)] + [rows]
        col_values = list(dict.fromkeys(w.sort_values(cols)[cols]))
        base_value = None
        if baseline:
            key, value = baseline
            if column(key, all_keys) != cols:
                raise StbenchError(f"--baseline must name the column axis ({cols if cols != 'label' else 'device'}), not {baseline[0]}")
            matches = [v for v in col_values if str(v) == value]
            if not matches:
                raise StbenchError(f"--baseline {baseline[0]}={value} matches no result; present: {', '.join(map(str, col_values))}")
            base_value = matches[0]
        table = []
        for idx, g in w.groupby(index, sort=True):
            idx = idx if isinstance(idx, tuple) else (idx,)
            by_col = {r[cols]: r for _, r in g.iterrows()}
            line = dict(zip(index, idx))
            for v in col_values:
                line[str(v)] = format_cell(by_col[v]) if v in by_col else "-"
            if base_value is not None:
                for v in col_values:
                    if v != base_value:
                        line[f"{v} vs {base_value}"] = ratio_text(metric, by_col.get(base_value), by_col.get(v))
            table.append(line)
        out[workload] = pd.DataFrame(table).rename(columns={"label": "device"})
    return out


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
        agg = w.groupby(keys, sort=True)[[*PHASES, "samples_per_s"]].median().reset_index()
        for p in PHASES:
            agg[p] = [f"{100 * v:.1f}%" for v in agg[p]]
        agg["samples_per_s"] = [format_number(v) for v in agg["samples_per_s"]]
        out[workload] = agg.rename(columns={"label": "device", **{p: p[:-2] for p in PHASES}})
    return out


def scaling(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Multi-process rows: the scaling study per world size and node count (see scaling.py)."""
    return scaling_of(df, keys_of(df))


def markdown(table: pd.DataFrame) -> str:
    return tabulate(table, headers="keys", tablefmt="pipe", showindex=False, disable_numparse=True)


def report(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
           baseline: tuple[str, str] | None = None) -> str:
    """The whole compare output as Markdown."""
    parts = []
    main, phases, scale = pivot(df, metric, rows, cols, baseline), phase_shares(df), scaling(df)
    for workload, table in main.items():
        parts.append(f"## {workload}: {metric} (median ± 95% CI half-width over repeats)\n\n{markdown(table)}")
        if workload in phases:
            parts.append(f"### {workload}: where the time went (share of train + eval)\n\n{markdown(phases[workload])}")
        if workload in scale:
            parts.append(f"### {workload}: data-parallel scaling against the smallest world\n\n{markdown(scale[workload])}")
    return "\n\n".join(parts) + "\n"
