"""The report of `stbench profile`: phase table, per-step memory and top operators as
Markdown, from a result folder's runs.csv and profile/<run_id>/ files (pure; no torch)."""

from __future__ import annotations

import csv
import json
from statistics import median
from pathlib import Path

from tabulate import tabulate

from ..device import is_cuda
from ..store.rows import PHASE_COLUMNS as PHASES
from . import syncs

TOP = 10


def _float(row: dict, key: str) -> float | None:
    try:
        return float(row.get(key))
    except (TypeError, ValueError):
        return None


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def phase_table(row: dict) -> str:
    times = [(key.removesuffix("_s"), _float(row, key) or 0.0) for key in PHASES]
    total = sum(t for _, t in times) or float("nan")
    lines = [[name, f"{t:.4f}", f"{100 * t / total:.1f}%"] for name, t in times]
    # x.stream_s is the workload's own figure; folders written before schema extras say stream_s
    stream = _float(row, "x.stream_s") or _float(row, "stream_s")
    if stream is not None:
        mb = _float(row, "x.stream_mb") or _float(row, "stream_mb") or 0.0
        lines.append(["relation streaming (within compute)", f"{stream:.4f}", f"{mb:,.1f} MiB moved"])
    return tabulate(lines, headers=["phase", "seconds", "share"], tablefmt="github")


MEMORY_COLUMNS = ("alloc_peak_above_start_mb", "cuda_max_allocated_mb", "rss_mb")
LARGEST = 5


def memory_summary(rows: list[dict]) -> str:
    """Per-step memory in a few lines, whatever the number of steps: min / median / max of
    each series over the profiled steps, then the five steps with the largest allocation
    peak. The full series stays in memory.csv."""
    shown = [r for r in rows if r.get("profiled") == "True"] or rows
    cols = [c for c in MEMORY_COLUMNS if any(_float(r, c) is not None for r in shown)]
    if not cols:
        return "no per-step memory was recorded"
    stats = []
    for c in cols:
        values = sorted(v for r in shown if (v := _float(r, c)) is not None)
        stats.append([c, f"{values[0]:,.4g}", f"{median(values):,.4g}", f"{values[-1]:,.4g}", str(len(values))])
    text = tabulate(stats, headers=["MiB", "min", "median", "max", "steps"], tablefmt="github", disable_numparse=True)
    key = cols[0]
    largest = sorted((r for r in shown if _float(r, key) is not None), key=lambda r: -_float(r, key))[:LARGEST]
    body = [[r["step"], *(f"{_float(r, c):,.4g}" if _float(r, c) is not None else "-" for c in cols)] for r in largest]
    return text + f"\n\nLargest steps by {key}:\n\n" + tabulate(body, headers=["step", *cols], tablefmt="github", disable_numparse=True)


def operator_table(rows: list[dict], cuda: bool) -> str:
    key = "self_device_ms" if cuda else "self_cpu_ms"
    body = [[r["operator"], r["calls"], f"{float(r[key]):.3f}", f"{float(r['cpu_total_ms']):.3f}"] for r in rows[:TOP]]
    return tabulate(body, headers=["operator", "calls", key, "cpu_total_ms"], tablefmt="github")


def trace_events(path: Path) -> int:
    """Number of events in a Chrome trace; ValueError if it is not one."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError(f"{path} is not a Chrome trace (no traceEvents list)")
    return len(data["traceEvents"])


def report(folder: Path, rows: list[dict]) -> str:
    parts = [f"# stbench profile: {folder}\n"]
    for row in rows:
        d = folder / "profile" / row["run_id"]
        title = f"## {row['workload']} on {row['device']}, batch {row['batch_size']}: {row['status']}"
        params = json.loads(row["params"]) if row.get("params") else {}
        if "relations" in params:
            title += f", relations={params['relations']}, mode={params.get('mode')}"
        parts.append(title + "\n")
        if row["status"] != "ok":
            parts.append(f"{row.get('reason', '')}\n")
            continue
        sps = _float(row, "steps_per_s")
        parts.append(f"steady steps/s: {sps:,.2f}\n" if sps else "")
        parts.append("### Phases (profiled run, seconds)\n\n" + phase_table(row) + "\n")
        parts.append("### Memory per step (MiB; every step in memory.csv)\n\n"
                     + memory_summary(_read(d / "memory.csv")) + "\n")
        parts.append("### Top operators\n\n" + operator_table(_read(d / "operators.csv"), is_cuda(row["device"])) + "\n")
        trace = d / "trace.json"
        if trace.exists() and is_cuda(row["device"]):
            parts.append(syncs.summary(trace) + "\n")
        parts.append(f"Chrome trace: {trace} ({trace_events(trace):,} events; open in https://ui.perfetto.dev)\n"
                     if trace.exists() else "no trace was written\n")
    return "\n".join(parts)
