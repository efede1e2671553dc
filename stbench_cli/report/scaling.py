"""The data-parallel scaling study (pure: rows in, a table out), as a thesis on multi-node DDP
reports it: per world size and node count, the epoch time, samples/s, speedup and efficiency
against the smallest world measured, the share of training time spent waiting for gradient
synchronisation, what one synchronisation costs, how many there are per epoch, and where a new
node joins (the sync cost usually jumps there: traffic leaves the machine).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .stats import format_number, show, significant
from .ttt import ttt_speedup

SHOWN = ("world_size", "nodes", "nproc_per_node")


def _median(values: pd.Series) -> float:
    """Median of the finite values (a figure older rows lack is NaN: shown as "-")."""
    v = pd.to_numeric(values, errors="coerce").replace([np.inf, -np.inf], np.nan).dropna()
    return float(v.median()) if len(v) else math.nan


def _fmt(x: float, text: str) -> str:
    return text if math.isfinite(x) else "-"


def with_layout(df: pd.DataFrame) -> pd.DataFrame:
    """Rows written before multi-node runs existed: one node, every process on it."""
    out = df.copy()
    if "nodes" not in out:
        out["nodes"] = 1
    out["nodes"] = pd.to_numeric(out["nodes"], errors="coerce").fillna(1).astype(int)
    per_node = out["world_size"] // out["nodes"]
    out["nproc_per_node"] = pd.to_numeric(out.get("nproc_per_node", per_node), errors="coerce").fillna(per_node)
    for col in ("epoch_s", "sync_count"):
        if col not in out:
            out[col] = math.nan
    return out


def _line(gn: pd.DataFrame, base: pd.DataFrame, base_world: int, new_node: bool) -> dict:
    sps, one = gn["samples_per_s"].tolist(), base["samples_per_s"].tolist()
    world, nodes = int(gn["world_size"].iloc[0]), int(gn["nodes"].iloc[0])
    speed = float(np.median(sps) / np.median(one)) if one and sps else math.nan
    note = "" if gn is base or significant(one, sps) else " (not significant)"
    share = _median(gn["sync_s"] / gn["train_s"])
    return {
        "nodes": nodes, "nproc": int(gn["nproc_per_node"].iloc[0]), "world": world,
        "epoch_s": format_number(_median(gn["epoch_s"])),
        "samples_per_s": format_number(float(np.median(sps))),
        "speedup": _fmt(speed, f"{speed:.2f}x{note}"),
        # the thesis' point: a world's throughput speedup is not its convergence speedup
        "ttt_speedup": ttt_speedup(gn, base),
        "efficiency": _fmt(speed, f"{100 * speed * base_world / world:.0f}%"),
        "sync_share": _fmt(share, f"{100 * share:.1f}%"),
        "ms_per_sync": format_number(_median(1000 * gn["sync_s"] / gn["sync_count"].where(gn["sync_count"] > 0))),
        "syncs_per_epoch": format_number(_median(gn["sync_count"] / gn["epochs"])),
        "node_boundary": f"<- node {nodes} joins" if new_node else "",
    }


def _group_lines(g: pd.DataFrame) -> list[dict]:
    """One line per (world, nodes), smallest world first; speedups against the smallest."""
    parts = list(g.groupby(["world_size", "nodes"], sort=True))
    (base_world, base_nodes), base = parts[0]
    lines, nodes_seen = [], int(base_nodes)
    for (_, nodes), gn in parts:
        lines.append(_line(gn, base, int(base_world), int(nodes) > nodes_seen))
        nodes_seen = max(nodes_seen, int(nodes))
    return lines


def scaling(df: pd.DataFrame, keys: list[str]) -> dict[str, pd.DataFrame]:
    """Per workload, the scaling table of its multi-process rows (every strategy but `single`)
    that span at least two worlds; `keys` are the frame's cell keys (see tables.keys_of)."""
    df = with_layout(df)
    multi = df[(df["strategy"] != "single") & (df["status"] == "ok")]
    out = {}
    for workload, w in multi.groupby("workload", sort=True):
        if len(w[["world_size", "nodes"]].drop_duplicates()) < 2:
            continue
        group_keys = [k for k in keys if k not in SHOWN]
        lines = []
        for key, g in w.groupby(group_keys, sort=True, dropna=False):
            shown = {k: show(v)  # "-" for a parameter older rows lack
                     for k, v in zip(group_keys, key) if w[k].astype(str).nunique() > 1 or k == "label"}
            lines += [{**shown, **line} for line in _group_lines(g)]
        table = pd.DataFrame(lines).rename(columns={"label": "device"})
        if not table["node_boundary"].any():  # every world on one node: nothing to mark
            table = table.drop(columns="node_boundary")
        if (table["ttt_speedup"] == "-").all():  # no run had a target, or none reached it
            table = table.drop(columns="ttt_speedup")
        out[workload] = table
    return out
