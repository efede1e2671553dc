"""`stbench profile`'s report (pure; no torch): per profiled run what it found in a sentence,
then its phases, its memory per step, its top operators and, on CUDA, the host-device
synchronisations per step counted in its Chrome trace (store.trace says what counts), as
Markdown from the result folder's runs.csv rows and profile/<run_id>/ files.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from statistics import median

from tabulate import tabulate

from ..device import is_cuda
from ..store.files import read_lines
from ..store.rows import PHASE_COLUMNS, HostLine, KernelLine, OperatorLine, Run, StepMemory
from ..store.trace import syncs_per_step

TOP = 10
MEMORY_COLUMNS = ("alloc_peak_above_start_mb", "cuda_max_allocated_mb", "rss_mb")
LARGEST = 5


def _phases(run: Run) -> list[tuple[str, float]]:
    return [(key.removesuffix("_s"), run.get(key, 0.0)) for key in PHASE_COLUMNS]


def phase_table(run: Run) -> str:
    """Seconds and share of the profiled run's time per phase; stnn's relation streaming, a
    part of compute, with its share of the same total."""
    times = _phases(run)
    total = sum(t for _, t in times) or float("nan")
    lines = [[name, f"{t:.4f}", f"{100 * t / total:.1f}%"] for name, t in times]
    stream = run["x.stream_s"]
    if stream is not None:
        lines.append(
            ["relation streaming (within compute)", f"{stream:.4f}", f"{100 * stream / total:.1f}%"]
        )
    return tabulate(lines, headers=["phase", "seconds", "share"], tablefmt="github")


def memory_summary(rows: list[StepMemory]) -> str:
    """Per-step memory in a few lines, whatever the number of steps: min / median / max of
    each series over the profiled steps, then the five steps with the largest allocation
    peak. The full series stays in memory.csv."""
    shown = [r for r in rows if r.profiled] or rows
    cols = [c for c in MEMORY_COLUMNS if any(getattr(r, c) is not None for r in shown)]
    if not cols:
        return "no per-step memory was recorded"
    stats = []
    for c in cols:
        values = sorted(v for r in shown if (v := getattr(r, c)) is not None)
        stats.append(
            [
                c,
                f"{values[0]:,.4g}",
                f"{median(values):,.4g}",
                f"{values[-1]:,.4g}",
                str(len(values)),
            ]
        )
    text = tabulate(
        stats,
        headers=["MiB", "min", "median", "max", "steps"],
        tablefmt="github",
        disable_numparse=True,
    )
    key = cols[0]
    largest = sorted(
        (r for r in shown if getattr(r, key) is not None), key=lambda r: -getattr(r, key)
    )
    body = [
        [r.step, *(f"{v:,.4g}" if (v := getattr(r, c)) is not None else "-" for c in cols)]
        for r in largest[:LARGEST]
    ]
    return (
        text
        + f"\n\nLargest steps by {key}:\n\n"
        + tabulate(body, headers=["step", *cols], tablefmt="github", disable_numparse=True)
    )


def operator_table(rows: list[OperatorLine], cuda: bool, width: int | None = None) -> str:
    """The top operators; within `width` where one is given, a long name (a DataLoader's
    iterator, a CUDA kernel's template) wrapped inside its cell, never cut."""
    key = "self_device_ms" if cuda else "self_cpu_ms"
    body = [
        [r.operator, r.calls, f"{getattr(r, key):.3f}", f"{r.cpu_total_ms:.3f}"] for r in rows[:TOP]
    ]
    headers = ["operator", "calls", key, "cpu_total_ms"]
    text = tabulate(body, headers=headers, tablefmt="github")
    excess = max(map(len, text.splitlines())) - width if width and body else 0
    if excess > 0:
        name = max(max(len(r[0]) for r in body) - excess, len(headers[0]), 12)
        widths = [name, None, None, None]
        text = tabulate(body, headers=headers, tablefmt="github", maxcolwidths=widths)
    return text


def trace_events(path: Path) -> int:
    """Number of events in a Chrome trace; ValueError if it is not one."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError(f"{path} is not a Chrome trace (no traceEvents list)")
    return len(data["traceEvents"])


def finding(run: Run, folder: Path) -> str:
    """What the profile found, in a sentence: where the run's time went, what stnn's streaming
    moved, the operator that took the most time, and on CUDA the syncs per step."""
    times = sorted(_phases(run), key=lambda p: -p[1])
    total = sum(t for _, t in times)
    if not total > 0:
        return "No phase time was recorded."
    shares = [f"{name} {100 * t / total:.1f}%" for name, t in times[1:] if t / total >= 0.001]
    parts = [
        f"{times[0][0]} took {100 * times[0][1] / total:.1f}% of the profiled run's "
        f"{total:.2f} s" + (f" ({', '.join(shares)})" if shares else "")
    ]
    if run["x.stream_s"] is not None:
        stream, moved = run["x.stream_s"], run.get("x.stream_mb", 0.0)
        parts.append(
            f"relation streaming, within compute, moved {moved:,.1f} MiB in "
            f"{stream:.3g} s ({100 * stream / total:.1f}%)"
        )
    cell = folder / "profile" / str(run["run_id"])
    key = "self_device_ms" if is_cuda(str(run["device"])) else "self_cpu_ms"
    ops = [
        (r.operator, getattr(r, key))
        for r in read_lines(cell / "operators.csv", OperatorLine)
        if getattr(r, key)
    ]
    spent = sum(ms for _, ms in ops)
    if ops and spent > 0:
        name, ms = max(ops, key=lambda o: o[1])
        what = "self device" if key == "self_device_ms" else "self CPU"
        parts.append(
            f"the most {what} time went to {name} ({ms:,.1f} ms, "
            f"{100 * ms / spent:.0f}% of the operators')"
        )
    trace = cell / "trace.json"
    if trace.exists() and is_cuda(str(run["device"])):
        counts = [len(v) for v in syncs_per_step(trace).values()]
        if counts:
            parts.append(f"at most {max(counts)} host-device synchronisations per profiled step")
    host = read_lines(cell / "host.csv", HostLine)
    if host:  # what the host's threads did a step: inside its operators (on a GPU, their host
        # path: what the predictions charge each), and between them
        ops = median(h.operators for h in host)
        inside = median(h.in_operators_ms for h in host)
        between = median(h.between_ms for h in host)
        parts.append(
            f"the host, a step: {ops:,.0f} operators, {inside:,.2f} ms inside them "
            f"({1e3 * inside / max(ops, 1):,.1f} us each), {between:,.2f} ms between them "
            "(host.csv)"
        )
    kernels = read_lines(cell / "kernels.csv", KernelLine)
    if kernels:  # a GPU's timeline: what a step launches (the predictions count it on a CPU)
        launches = sum(k.per_step for k in kernels)
        parts.append(f"{launches:,.0f} kernels, copies and memsets a step (kernels.csv)")
    return "; ".join(parts) + "."


def report(folder: Path, runs: list[Run], width: int | None = None) -> tuple[str, str]:
    """The profile report of a result folder's runs (Markdown), read once and written twice:
    whole (profile.md), and within `width` where one is given (a terminal's: sentences folded
    between words, a path kept whole so it copies, operator names wrapped in their cells)."""
    parts: list = [("prose", f"# stbench profile: {folder}")]  # text, sentences or operators
    for run in runs:
        d = folder / "profile" / str(run["run_id"])
        title = (
            f"## {run['workload']} on {run['device']}, batch {run['batch_size']}: {run['status']}"
        )
        if "relations" in run.params:
            title += f", relations={run.params['relations']}, mode={run.params.get('mode')}"
        parts.append(("prose", title))
        if run["status"] != "ok":
            parts.append(("prose", run.get("reason") or ""))
            continue
        parts.append(("prose", f"Finding: {finding(run, folder)}"))
        sps = run["steps_per_s"]
        parts.append(("text", f"steady steps/s: {sps:,.2f}\n" if sps else ""))
        parts.append(("text", "### Phases (profiled run, seconds)\n\n" + phase_table(run) + "\n"))
        memory = memory_summary(read_lines(d / "memory.csv", StepMemory))
        parts.append(("text", f"### Memory per step (MiB; every step in memory.csv)\n\n{memory}\n"))
        cuda = is_cuda(str(run["device"]))
        parts.append(("operators", read_lines(d / "operators.csv", OperatorLine), cuda))
        trace = d / "trace.json"
        if trace.exists() and cuda:
            parts.append(("prose", trace_summary(trace)))
        if trace.exists():
            events = trace_events(trace)
            parts.append(
                (
                    "prose",
                    f"Chrome trace: {trace} ({events:,} events; open in https://ui.perfetto.dev)",
                )
            )
        else:
            parts.append(("text", "no trace was written\n"))
    return _written(parts, None), _written(parts, width)


def _written(parts: list, width: int | None) -> str:
    def one(kind: str, *what) -> str:
        if kind == "operators":
            return f"### Top operators\n\n{operator_table(*what, width)}\n"
        if kind == "text":
            return what[0]
        if not width:  # a sentence, whole
            return what[0] + "\n"
        return textwrap.fill(what[0], width, break_long_words=False, break_on_hyphens=False) + "\n"

    return "\n".join(one(*part) for part in parts)


def trace_summary(trace: Path) -> str:
    """One line for the profile report."""
    per_step = syncs_per_step(trace)
    if not per_step:
        return "host-device synchronisations: no profiled step in the trace"
    counts = [len(v) for v in per_step.values()]
    names = sorted({n for v in per_step.values() for n in v})
    return (
        f"host-device synchronisations per profiled step: max {max(counts)}, "
        f"total {sum(counts)} over {len(counts)} steps"
        + (f" ({', '.join(names)})" if names else "")
    )
