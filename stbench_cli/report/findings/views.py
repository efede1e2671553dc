"""The one table that supports each kind of finding (pure): a study's rows in, a titled table
out, its keys marked for a narrow terminal (report.fit) and its labels in natural order."""

from __future__ import annotations

import math

import pandas as pd

from .. import tables
from ..order import sort_natural
from ..stats import format_number, show
from ..ttt import TITLE as TTT_TITLE, ttt_tables
from .cells import Cell, axes, cells, contrast, peak_memory, rank_memory, short
from .cost import size_axis
from .speed import is_eager_fp32

SPREAD = "median ± 95% CI half-width over repeats"
SCALING_COLUMNS = ("nodes", "nproc", "world", "samples_per_s", "speedup", "efficiency", "sync_share", "ttt_speedup",
                   "node_boundary")


def cells_table(s: pd.DataFrame, keys: list[str], columns: list[tuple[str, str]]) -> pd.DataFrame:
    """One line per cell (every status): its keys, then each figure's median ± half-width over
    its ok runs (a cell with none shows its status)."""
    keys = keys or ["label"]
    lines = []
    for key, g in s.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        line = {("device" if k == "label" else short(k)): show(v) for k, v in zip(keys, key)}
        good = g[g["status"] == "ok"]
        for col, header in columns:
            values = tuple(good[col].dropna().astype(float)) if col in good.columns else ()
            line[header] = Cell("", values).amount() if values else "/".join(sorted(set(g["status"]) - {"ok"})) or "-"
        lines.append(line)
    names = list(lines[0])[: len(keys)]
    return _keyed(sort_natural(pd.DataFrame(lines), names), names)


def _keyed(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The table with its keys marked and parameters named as the user typed them (no `p.`)."""
    names = {c: short(c) for c in table.columns}
    out = table.rename(columns=names)
    out.attrs = {**table.attrs, "keys": [names.get(k, k) for k in keys]}
    return out


def _keys(s: pd.DataFrame, *first: str) -> list[str]:
    """The study's varying keys, the named ones first."""
    rest = [k for k in axes(s) if k not in first]
    return [k for k in first if k in axes(s)] + rest


def device(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    rows = next((k for k in axes(s) if k != "label"), "epochs")
    table = tables.pivot(s, "samples_per_s", rows.removeprefix("p."), "device", first_is_baseline=True)[workload]
    return f"samples/s by hardware ({SPREAD}), against the first column", _keyed(table, table.attrs["keys"])


def scaling(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame] | None:
    table = tables.scaling(s).get(workload)
    if table is None:
        return None
    lead = list(table.columns[: list(table.columns).index("nodes")])
    layout = ["nodes", "nproc", "world"]
    if (table["nproc"] == table["world"]).all():  # every world on one node: nproc says it again
        layout.remove("nproc")
    kept = table[lead + layout + [c for c in SCALING_COLUMNS if c in table.columns and c not in ("nodes", "nproc", "world")]]
    kept = kept.rename(columns={"samples_per_s": "samples/s", "sync_share": "sync"})
    return ("data-parallel scaling against the smallest world: speedup, efficiency, and sync (the share of "
            "training time spent waiting for gradient synchronisation)", _keyed(kept, lead + layout))


def batch(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    keys = _keys(s, "batch_size")
    order = [*keys[1:], keys[0]]  # the batch last: the row axis
    table = cells_table(s, order, [("samples_per_s", "samples/s")])
    gains, prev = {}, {}
    for c in cells(s, "samples_per_s", order):
        group, b = c.key[:-1], float(c.key[-1])
        if group in prev:
            gains[tuple(show(v) for v in c.key)] = _gain(prev[group], c, b)
        prev[group] = (c, b)
    names = list(table.attrs["keys"])
    table["per doubling"] = [gains.get(tuple(r), "") for r in table[names].itertuples(index=False)]
    return f"samples/s per batch size ({SPREAD}); per doubling: the gain over the batch before", table


def _gain(before: tuple[Cell, float], c: Cell, b: float) -> str:
    cell, size = before
    doublings = math.log2(b / size)
    if not (doublings > 0 and cell.median > 0):
        return ""
    return f"{100 * ((c.median / cell.median) ** (1 / doublings) - 1):+.1f}%"  # as the finding says it


def precision(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    keys = _keys(s, "p.precision", "p.compile")
    table = cells_table(s, keys, [("samples_per_s", "samples/s")])
    sweep = cells(s, "samples_per_s", keys)
    base = next((c for c in sweep if is_eager_fp32(dict(zip(keys, c.key)))), None)
    words = {tuple(show(v) for v in c.key): ("baseline" if c is base else _against(base, c)) for c in sweep} if base else {}
    compiled = {tuple(show(v) for v in c.key): format_number(c.median) for c in cells(s, "compile_s", keys)}
    names = list(table.attrs["keys"])
    table["vs fp32 eager"] = [words.get(tuple(r), "-") for r in table[names].itertuples(index=False)]
    table["compile s"] = [compiled.get(tuple(r), "-") for r in table[names].itertuples(index=False)]
    return (f"samples/s ({SPREAD}) against fp32 eager, and the median seconds spent compiling", table)


def _against(base: Cell, c: Cell) -> str:
    """pyperf's table wording: the ratio, or "not significant"."""
    text = contrast(base, c, amounts=False, note=False)
    return "not significant" if text.startswith("no significant") else text


def epochs(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    table = tables.pivot(s, "wall_s", "epochs", "device", missing_baseline_ok=True)[workload]
    return f"wall_s ({SPREAD})", _keyed(table, table.attrs["keys"])


def size(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    key = size_axis(s)
    mem, measure = peak_memory(s)
    rows = s.assign(mem_mb=mem, step_ms=1000 * s.get("global_batch_size", s["batch_size"]).astype(float)
                    / s["samples_per_s"])
    columns = [("mem_mb", f"{measure} MiB"), ("predicted_mb", "predicted MiB"), ("step_ms", "step ms")]
    if "predicted_mb" not in s.columns or s["predicted_mb"].isna().all():
        columns.pop(1)
    keys = [k for k in axes(s) if k not in (key, "label")] + [key]
    return f"memory and step time by problem size ({SPREAD})", cells_table(rows, keys, columns)


def target(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame] | None:
    table = ttt_tables(s).get(workload)
    return (TTT_TITLE, sort_natural(table, table.attrs["keys"])) if table is not None else None


def tradeoff(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    mem, measure = rank_memory(s)
    columns = [("mem_mb", f"{measure} MiB"), ("samples_per_s", "samples/s")]
    if "data_mb" in s.columns and s["data_mb"].nunique() > 1:
        columns.append(("data_mb", "data MiB"))
    return f"memory and samples/s per cell ({SPREAD})", cells_table(s.assign(mem_mb=mem), _keys(s), columns)


def single(s: pd.DataFrame, workload: str) -> tuple[str, pd.DataFrame]:
    mem, measure = peak_memory(s)
    columns = [("samples_per_s", "samples/s"), ("wall_s", "wall s"), ("mem_mb", f"{measure} MiB")]
    return f"the cell ({SPREAD})", cells_table(s.assign(mem_mb=mem), [], columns)
