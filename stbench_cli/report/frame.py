"""The frame every report table starts from: result rows typed, labelled by hardware, their
parameters as `p.<name>` columns, and their cells summarized over repeats (pure)."""

from __future__ import annotations

import json
import math
from pathlib import PurePath
from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import StbenchError
from ..store.rows import BOOL_COLUMNS, TEXT_COLUMNS
from .machines import labels
from .stats import ci95

CELL_KEYS = ["strategy", "world_size", "nodes", "batch_size", "epochs"]
FREE_TEXT = ("study", "study_key", "question")  # a row's folder, its study and the study's command


def frame(rows: list[dict], defaults: Mapping[str, Mapping[str, object]] | None = None) -> pd.DataFrame:
    """Rows from one or more runs.csv files as a typed DataFrame with a hardware `label`.

    The label names the hardware (`EPYC (2 cores)`, `T4`) and is unique per machine
    fingerprint (report.machines), so two machines are never pooled. Workload parameters that
    vary become `p.<name>` columns, integers kept integers and data paths shown by file name.
    A parameter an older row lacks (it did not exist yet) takes its default from `defaults`
    (workload -> parameter -> value), so the same cell is never split by a missing value.
    """
    if not rows:
        raise StbenchError("no result rows to compare")
    df = pd.DataFrame(rows)
    if "nodes" not in df:  # rows from before multi-node runs
        df["nodes"] = 1
    for col in df.columns:
        if col in BOOL_COLUMNS:
            df[col] = df[col].map({"True": 1.0, "False": 0.0, True: 1.0, False: 0.0})
        elif col not in TEXT_COLUMNS and col not in FREE_TEXT:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    df["label"] = labels(df)
    known = defaults or {}
    params = [{**known.get(w, {}), **(json.loads(p) if isinstance(p, str) and p else {})}
              for w, p in zip(df["workload"], df["params"])]
    varied = {}
    for name in dict.fromkeys(k for p in params for k in p):
        column_values = param_column([p.get(name) for p in params], df.index)
        if column_values.astype(str).nunique(dropna=False) > 1:
            varied[f"p.{name}"] = column_values
    # joined at once: columns added one at a time leave pandas a fragmented frame (and a warning)
    return pd.concat([df, pd.DataFrame(varied, index=df.index)], axis=1) if varied else df.copy()


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


def varying(s: pd.DataFrame, keys: list[str]) -> list[str]:
    """The keys whose value differs between rows (a key the frame lacks does not vary; a missing
    value differs from a present one, as a groupby with dropna=False sees it)."""
    return [k for k in keys if k in s.columns and s[k].astype(str).nunique(dropna=False) > 1]


def numeric(rows: list[dict], text: tuple[str, ...] = ("study", "run_id")) -> pd.DataFrame:
    """epochs.csv / system.csv rows as numbers (they come back from the files as text)."""
    df = pd.DataFrame(rows)
    for col in df.columns:
        if col not in text:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def runs_frame(runs: list[dict], epochs: pd.DataFrame, defaults: Mapping[str, Mapping[str, object]] | None = None) -> pd.DataFrame:
    """The runs as frame() has them (each tagged with its `study` folder), with the ms
    of exposed gradient sync per training step from epochs.csv."""
    df = frame(runs, defaults)
    if not epochs.empty:
        per_run = epochs.groupby(["study", "run_id"])[["sync_s", "steps"]].sum().reset_index()
        per_run["sync_ms"] = 1000 * per_run["sync_s"] / per_run["steps"].where(per_run["steps"] > 0)
        df = df.merge(per_run[["study", "run_id", "sync_ms"]], on=["study", "run_id"], how="left")
    else:
        df["sync_ms"] = float("nan")
    return df
