"""The acceptance's checks on profiler traces: host-device synchronisation inside profiled steps,
stnn's offload side stream, and the kernels a step launches against the CPU's count of them
that the GPU predictions use (readers of a `stbench profile` folder and pure judges)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from stbench.runner.doctor import Check
from stbench.store.files import read_lines
from stbench.store.rows import KernelLine
from stbench.store.trace import step_windows, syncs_per_step

from .checks_rows import judge_memory
from .verdicts import (
    NothingToJudge,
    anatomy_of,
    combine,
    cuda_rows,
    param,
    rows_ok,
    studies,
    verdict,
)


def _profiled(folder: Path, run_id: str, name: str) -> Path:
    """A file a cell's profile wrote (trace.json, kernels.csv, host.csv), in whichever of the
    step's studies holds it: a run's archive brings the tables back without the trace."""
    found = [s / "profile" / run_id / name for s in studies(folder)]
    found = [p for p in found if p.is_file()]
    if not found:
        raise NothingToJudge(f"no {name} in {run_id}'s profile")
    return found[0]


def _trace(folder: Path, run_id: str) -> Path:
    return _profiled(folder, run_id, "trace.json")


def judge_syncs(
    per_step: dict[int, list[str]],
    most: int,
    allowed: frozenset[str] = frozenset(),
    copies: dict[int, int] | None = None,
) -> Check:
    """per_step: profiled step -> its synchronising calls. A trace with no profiled step fails
    (nothing was checked). At most `most` syncs a step, plus, with `copies` (step -> the
    host-to-device copies in it), one call named in `allowed` per copy: a wait for the copy that
    last read a staging buffer."""
    if not per_step:
        return verdict("syncs", False, "no ProfilerStep window in the trace: nothing was checked")
    worst = 0
    for step, calls in per_step.items():
        waits = [c for c in calls if c in allowed]
        others = [c for c in calls if c not in allowed]
        copied = (copies or {}).get(step, 0)
        if len(waits) > copied or len(others) > most:
            return verdict(
                "syncs",
                False,
                f"step {step}: {len(calls)} host-device syncs "
                f"({', '.join(sorted(set(calls)))}); at most {most} + one "
                f"{'/'.join(sorted(allowed)) or 'wait'} per copy ({copied} copies)",
            )
        worst = max(worst, len(calls))
    return verdict(
        "syncs", True, f"{len(per_step)} profiled steps, at most {worst} host-device syncs in one"
    )


def _copies_per_step(events: list[dict], per_step: dict[int, list[str]]) -> dict[int, int]:
    runtime = [
        e["ts"] for e in events if e.get("cat") == "cuda_runtime" and "Memcpy" in str(e.get("name"))
    ]
    return {
        k: sum(a <= ts <= b for ts in runtime) for a, b, k in step_windows(events) if k in per_step
    }


def no_syncs(folder: Path) -> Check:
    """Profiled steps of every cuda cell: no host-device synchronisation at all."""
    return combine(
        "no-syncs",
        [
            _labelled(r, judge_syncs(syncs_per_step(_trace(folder, r["run_id"])), 0))
            for r in cuda_rows(rows_ok(folder))
        ],
    )


def stnn_syncs(folder: Path) -> Check:
    """stnn profiles: dense and sparse relations make no sync a step (row-sparse Adam reads
    nothing back, optim.py); offload only waits, with cudaEventSynchronize, for the copy that
    last read a staging buffer when the device fell behind: at most one wait per copy."""
    out = []
    for r in cuda_rows(rows_ok(folder), "stnn"):
        path = _trace(folder, r["run_id"])
        per_step = syncs_per_step(path)
        if param(r, "relations") == "offload":
            copies = _copies_per_step(json.loads(path.read_text())["traceEvents"], per_step)
            out.append(
                _labelled(r, judge_syncs(per_step, 0, frozenset({"cudaEventSynchronize"}), copies))
            )
        else:
            out.append(_labelled(r, judge_syncs(per_step, 0)))
    return combine("syncs", out)


def _labelled(row: dict, check: Check) -> Check:
    """The check with the cell it judged in front of its detail."""
    what = param(row, "relations") or param(row, "batching") or row["workload"]
    return Check(check.name, check.device, check.status, f"{what}: {check.detail}", check.figures)


def overlap_share(
    copies: list[tuple[float, float, object]], kernels: list[tuple[float, float, object]]
) -> float:
    """The share of the copies' time that a kernel on another stream overlaps."""
    total = sum(b - a for a, b, *_ in copies)
    hidden = 0.0
    for a, b, stream, *_ in copies:
        spans = sorted(
            (max(a, x), min(b, y)) for x, y, t in kernels if t != stream and x < b and y > a
        )
        end = a
        for x, y in spans:
            hidden += max(0.0, y - max(x, end))
            end = max(end, y)
    return hidden / total if total > 0 else 0.0


def judge_side_stream(copies: list[tuple], kernels: list[tuple]) -> Check:
    """The offload's relation chunks must be copied on a stream of their own (else nothing can
    hide them). copies: (start, end, stream, bytes). The compute stream still copies each
    step's batch (task.py: a few KB, 0.02 ms a profile on the H100), so the rule is that every
    copy it carries is smaller than every side-stream copy: a relation chunk there fails. How
    much of the chunks compute hides depends on the grid and chunk, and no threshold has been
    measured on a GPU yet: the share is reported as a figure, not judged."""
    busiest: dict[object, float] = {}
    for a, b, t in kernels:
        busiest[t] = busiest.get(t, 0.0) + b - a
    compute = max(busiest, key=busiest.get) if busiest else None
    side = [c for c in copies if c[2] != compute]
    if not side:
        where = "on the compute stream only" if copies else "in the trace"
        return verdict("offload-side-stream", False, f"no host-to-device copy {where}")
    smallest = min(c[3] for c in side)
    chunks_there = [c for c in copies if c[2] == compute and c[3] >= smallest]
    if chunks_there:
        ms = sum(b - a for a, b, *_ in chunks_there) / 1e3
        return verdict(
            "offload-side-stream",
            False,
            f"{len(chunks_there)} copies of {smallest:,} bytes or more ({ms:.2f} ms) ran on the "
            "compute stream",
        )
    share = overlap_share(side, kernels)
    copied_ms = sum(b - a for a, b, *_ in side) / 1e3
    mb = sum(c[3] for c in side) / 2**20
    return verdict(
        "offload-side-stream",
        True,
        f"{len(side)} copies ({mb:,.1f} MiB) on a side stream; {100 * share:.0f}% of their "
        f"{copied_ms:.1f} ms overlaps compute (a figure, not judged)",
        {"overlap": share},
    )


def offload_stream(folder: Path) -> Check:
    """stnn's offload profile: its relation copies run on a side stream; the overlap a figure."""
    rows = [r for r in cuda_rows(rows_ok(folder), "stnn") if param(r, "relations") == "offload"]
    if not rows:
        raise NothingToJudge("no offload cuda row")
    events = json.loads(_trace(folder, rows[0]["run_id"]).read_text())["traceEvents"]

    def spans(cat: str, name: str = "") -> list[tuple]:
        return [
            (e["ts"], e["ts"] + e.get("dur", 0), e.get("tid"), e.get("args", {}).get("bytes"))
            for e in events
            if e.get("cat") == cat and name in str(e.get("name", ""))
        ]

    copies = spans("gpu_memcpy", "HtoD")
    if any(c[3] is None for c in copies):  # Kineto writes each copy's bytes; judge none without
        raise NothingToJudge("host-to-device copies without their bytes in the trace")
    return judge_side_stream(copies, [k[:3] for k in spans("kernel")])


def judge_kernel_count(workload: str, measured: float, counted: float) -> Check:
    """The launches a step makes on the GPU (its profile's kernels.csv) against the CPU's count
    of them (child/anatomy.py, which the GPU predictions' launch term uses): the count claims to
    be a floor, so a count above the measurement fails; their ratio is the figure."""
    ok = 0 < counted <= measured
    return verdict(
        "kernel-count",
        ok,
        f"{workload}: {measured:,.1f} kernels, copies and memsets a step measured, "
        f"{counted:,.1f} counted on the CPU ({measured / counted if counted else math.nan:.2f}x)"
        + ("" if ok else ": the count is no floor"),
        {"measured": measured, "counted": counted},
    )


def kernel_count(folder: Path) -> Check:
    """Each cuda cell of a profile step: its kernels.csv's launches a step against the CPU's
    count for the cell's parameters."""
    out = []
    for r in cuda_rows(rows_ok(folder)):
        table = _profiled(folder, r["run_id"], "kernels.csv")  # the table, not the trace
        measured = sum(k.per_step for k in read_lines(table, KernelLine))
        out.append(judge_kernel_count(r["workload"], measured, anatomy_of(r).launches))
    return combine("kernel-count", out)


def judge_host_per_operator(workload: str, operators: float, inside_ms: float, floor_us: float):
    """A real step's operators on a GPU's host (its profile's host.csv: each top-level
    operator's host path, autograd's recording and the launch included) against what the GPU
    predictions' bound charges an operator at least (the card's `eager_op_us`, an in-place add
    on one element): a step whose operators took less each would make the bound too high, so
    that fails; their ratio is the figure, what a tighter bound could charge."""
    each_us = 1e3 * inside_ms / operators if operators else math.nan
    ok = operators > 0 and each_us >= floor_us
    return verdict(
        "host-per-operator",
        ok,
        f"{workload}: {operators:,.0f} operators a step, {each_us:,.1f} us each on the host "
        f"against the bound's {floor_us:.1f} ({each_us / floor_us:.2f}x)"
        + ("" if ok else ": the bound charges an operator more than a real step's took"),
        {"operators": operators, "each_us": each_us, "floor_us": floor_us},
    )


def host_per_operator(folder: Path) -> Check:
    """Each cuda cell of a profile step: its operators' host path a step (host.csv, the median
    step) against the bound's least cost of an operator for the card (gpus.toml)."""
    from statistics import median

    from stbench.plan.predict import least_operator_s, read_gpus, table_name
    from stbench.store.rows import HostLine

    gpus, out = read_gpus(), []
    for r in cuda_rows(rows_ok(folder)):
        lines = read_lines(_profiled(folder, r["run_id"], "host.csv"), HostLine)
        card = gpus.get(table_name(str(r["device_name"]), gpus) or "")
        card = card or next(iter(gpus.values()))  # the [launch] section's, where it has none
        out.append(
            judge_host_per_operator(
                r["workload"],
                median(h.operators for h in lines),
                median(h.in_operators_ms for h in lines),
                least_operator_s(card) * 1e6,
            )
        )
    return combine("host-per-operator", out)


MEMORY_ESTIMATE = (0.67, 1.5)  # the allocator's peak over the anatomy's prediction


def memory_estimate(folder: Path, may_skip: bool = False) -> Check:
    """Each cuda cell of a profile step whose workload predicts no memory itself: the
    allocator's peak against the step's memory as `gpu-vs-cpu` predicts it on a machine
    without a GPU (its anatomy's tensors and the libraries' workspaces), within
    MEMORY_ESTIMATE (the first H100 run's rows: 1.00-1.35x, dcrnn-pems' gpu-index the
    highest, its series then held twice on the GPU)."""
    from stbench.plan.predict import anatomy_memory_mb
    from stbench.plan.registry import get

    ratios = {}
    for r in cuda_rows(rows_ok(folder, may_skip=may_skip)):
        if get(r["workload"]).predict:  # its own model: the memory-prediction check's
            continue
        predicted = anatomy_memory_mb(anatomy_of(r), int(r["batch_size"]))
        if predicted is None or r["peak_gpu_mb"] is None:
            raise NothingToJudge(f"{r['run_id']}: no predicted or no measured peak")
        ratios[f"{r['workload']} {r['run_id']}"] = r["peak_gpu_mb"] / predicted
    if not ratios:
        raise NothingToJudge("no cuda row of a workload without a memory model")
    return judge_memory(ratios, *MEMORY_ESTIMATE, kind="memory-estimate")
