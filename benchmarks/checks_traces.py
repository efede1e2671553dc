"""The GPU acceptance's checks on profiler traces, distributed worlds, memory and NVML (readers
and pure judges; gpu_checks.py is their command line)."""

from __future__ import annotations

import json
from pathlib import Path

from checks_rows import Fail, Untested, _cuda, _f, _ok, _param, judge_agree
from stbench.report.profile import syncs_per_step
from stbench.store.results import read_series


def _trace(folder: Path, run_id: str) -> list[dict]:
    return json.loads((folder / "profile" / run_id / "trace.json").read_text())["traceEvents"]


# --- host-device synchronisation ------------------------------------------------------------

def judge_syncs(per_step: dict[int, list[str]], most: int, allowed: frozenset[str] = frozenset(),
                copies: dict[int, int] | None = None) -> str:
    """per_step: profiled step -> its synchronising calls. A trace with no profiled step fails
    (nothing was checked). At most `most` syncs a step, plus, with `copies` (step -> the
    host-to-device copies in it), one call named in `allowed` per copy: a wait for the
    copy that last read a staging buffer."""
    if not per_step:
        raise Fail("no ProfilerStep window in the trace: nothing was checked")
    worst = 0
    for step, calls in per_step.items():
        waits = [c for c in calls if c in allowed]
        others = [c for c in calls if c not in allowed]
        if len(waits) > (copies or {}).get(step, 0) or len(others) > most:
            raise Fail(f"step {step}: {len(calls)} host-device syncs ({', '.join(sorted(set(calls)))}); "
                       f"at most {most} + one {'/'.join(sorted(allowed)) or 'wait'} per copy "
                       f"({(copies or {}).get(step, 0)} copies)")
        worst = max(worst, len(calls))
    return f"{len(per_step)} profiled steps, at most {worst} host-device syncs in one"


def _copies_per_step(events: list[dict], per_step: dict[int, list[str]]) -> dict[int, int]:
    from stbench.store.trace import step_windows

    runtime = [e["ts"] for e in events if e.get("cat") == "cuda_runtime" and "Memcpy" in str(e.get("name"))]
    return {k: sum(a <= ts <= b for ts in runtime) for a, b, k in step_windows(events) if k in per_step}


def no_syncs(folder: Path) -> str:
    """Profiled steps of every cell: no host-device synchronisation at all."""
    out = [judge_syncs(syncs_per_step(folder / "profile" / r["run_id"] / "trace.json"), 0) for r in _ok(folder)]
    return "no host-device sync: " + "; ".join(out)


def syncs(folder: Path) -> str:
    """stnn profiles: sparse relations make no sync a step (row-sparse Adam reads nothing back,
    optim.py); offload relations only wait, with cudaEventSynchronize, for the copy that last
    read a staging buffer when the device fell behind: at most one wait per copy."""
    out = []
    for r in _ok(folder):
        path = folder / "profile" / r["run_id"] / "trace.json"
        per_step = syncs_per_step(path)
        if _param(r, "relations") == "offload":
            verdict = judge_syncs(per_step, 0, frozenset({"cudaEventSynchronize"}),
                                  _copies_per_step(_trace(folder, r["run_id"]), per_step))
        else:
            verdict = judge_syncs(per_step, 0)
        out.append(f"{_param(r, 'relations')}: {verdict}")
    return "; ".join(out)


def overlap_share(copies: list[tuple[float, float, object]], kernels: list[tuple[float, float, object]]) -> float:
    """The share of the copies' time that a kernel on another stream overlaps."""
    total = sum(b - a for a, b, _ in copies)
    hidden = 0.0
    for a, b, stream in copies:
        spans = sorted((max(a, x), min(b, y)) for x, y, t in kernels if t != stream and x < b and y > a)
        end = a
        for x, y in spans:
            hidden += max(0.0, y - max(x, end))
            end = max(end, y)
    return hidden / total if total > 0 else 0.0


def judge_side_stream(copies: list[tuple], kernels: list[tuple]) -> str:
    """The offload copies must run on a stream of their own (else nothing can hide them). How
    much of them compute hides depends on the grid and chunk, and no threshold has been
    measured on a GPU yet: the share is reported as a figure, not judged."""
    if not copies:
        raise Fail("no host-to-device copy in the trace")
    busiest: dict[object, float] = {}
    for a, b, t in kernels:
        busiest[t] = busiest.get(t, 0.0) + b - a
    compute = max(busiest, key=busiest.get) if busiest else None
    on_compute = sum(b - a for a, b, t in copies if t == compute)
    if on_compute > 0:
        raise Fail(f"{on_compute / 1e3:.2f} ms of host-to-device copies ran on the compute stream")
    share = overlap_share(copies, kernels)
    return (f"copies on a side stream; {100 * share:.0f}% of {sum(b - a for a, b, _ in copies) / 1e3:.1f} ms "
            "overlaps compute (a figure, not judged)")


def offload_stream(folder: Path) -> str:
    """stnn offload profile: its relation copies run on a side stream; the overlap as a figure."""
    (row,) = _ok(folder)
    events = _trace(folder, row["run_id"])
    pick = lambda cat, name="": [(e["ts"], e["ts"] + e.get("dur", 0), e.get("tid"))  # noqa: E731
                                 for e in events if e.get("cat") == cat and name in str(e.get("name", ""))]
    return judge_side_stream(pick("gpu_memcpy", "HtoD"), pick("kernel"))


# --- worlds ---------------------------------------------------------------------------------

def distributed(folder: Path, backend: str = "gloo") -> str:
    """ddp/zero1/fsdp worlds of one backend: every cell ok (NCCL worlds wider than the GPUs
    skipped), multi-rank ddp/zero1 cells measured a sync, every strategy the same final loss
    per world. With no multi-rank cell of the backend ok, nothing was tested: UNTESTED."""
    rows = [r for r in _ok(folder, may_skip="GPU") if r["backend"] == backend]
    multi = [r for r in rows if int(r["world_size"]) > 1]
    if not multi:
        raise Untested(f"no {backend} world of 2+ ranks ran here (NCCL needs one GPU per rank)"
                       if backend == "nccl" else f"no {backend} world of 2+ ranks ran")
    quiet = [r["run_id"] for r in multi if r["strategy"] != "fsdp" and not _f(r, "sync_s") > 0]
    if quiet:
        raise Fail(f"multi-rank ddp/zero1 cells without a measured sync: {quiet}")
    worlds: dict[tuple, list[dict]] = {}
    for r in rows:
        worlds.setdefault((r["world_size"], r["nodes"]), []).append(r)
    for world, cells in worlds.items():
        first = _f(cells[0], "final_train_loss")
        judge_agree({f"world {world} {r['strategy']}": (first, _f(r, "final_train_loss")) for r in cells}, 1e-2)
    return f"{len(rows)} {backend} cells ok ({len(multi)} multi-rank); final losses agree within 1% per world"


def judge_checkpoint(peaks: dict[str, float]) -> str:
    if set(peaks) != {"none", "sqrt", "full"} or not peaks["none"] > peaks["sqrt"] > peaks["full"]:
        raise Fail(f"checkpointing did not lower the activation peak none > sqrt > full: {peaks}")
    return "activation peak MiB " + ", ".join(f"{k} {v:.1f}" for k, v in peaks.items())


def checkpoint(folder: Path) -> str:
    rows = _cuda(_ok(folder))
    if any(r["activation_source"] != "cuda allocator" for r in rows):
        raise Fail(f"activation peaks not from the CUDA allocator: {[r['activation_source'] for r in rows]}")
    return judge_checkpoint({_param(r, "checkpoint"): _f(r, "activation_peak_mb") for r in rows})


def memory_prediction(folder: Path, low: float = 0.5, high: float = 1.5) -> str:
    """stnn cuda rows: the allocator's peak within 0.5x..1.5x of the memory model's prediction."""
    out = []
    for r in _cuda(_ok(folder), "stnn"):
        ratio = _f(r, "peak_gpu_mb") / _f(r, "predicted_mb")
        if not low <= ratio <= high:
            raise Fail(f"stnn {_param(r, 'relations')}: peak {_f(r, 'peak_gpu_mb'):.1f} MiB is {ratio:.2f}x "
                       f"the predicted {_f(r, 'predicted_mb'):.1f} MiB (must be {low}-{high}x)")
        out.append(f"{_param(r, 'relations')} {ratio:.2f}x")
    return "stnn GPU peak / predicted: " + ", ".join(out)


def judge_nvml(samples: list[dict], energies: list[float]) -> str:
    fields = ("gpu_util_pct", "gpu_mem_mb", "gpu_power_w")
    missing = sorted({f for s in samples for f in fields if s.get(f) in (None, "")})
    if not samples or missing:
        raise Fail(f"system.csv of the cuda cells: {len(samples)} samples, empty fields {missing}")
    if not energies or not all(e > 0 for e in energies):
        raise Fail(f"gpu_energy_j missing or zero in a cuda row: {energies}")
    return f"{len(samples)} samples with NVML utilisation, memory and power; energy {', '.join(f'{e:.0f} J' for e in energies)}"


def nvml(folder: Path) -> str:
    """NVML utilisation, memory and power in every cuda cell's system.csv samples, energy in its row."""
    cuda = _cuda(_ok(folder))
    ids = {r["run_id"] for r in cuda}
    return judge_nvml([s for s in read_series(folder, "system.csv") if s["run_id"] in ids],
                      [_f(r, "gpu_energy_j") for r in cuda])
