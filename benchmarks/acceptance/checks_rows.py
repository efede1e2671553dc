"""The acceptance's checks on rows: agreement between relation modes, phases, device data, h2d,
NVML, memory and worlds. Each reads a step's folder and feeds a pure judge (`judge_*`: numbers
in, a `Check` out), so a test can feed every judge numbers that must fail it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from stbench.runner.doctor import Check
from stbench.store.files import read_series
from stbench.store.rows import Run, SystemRow

from .verdicts import (
    FAIL,
    PASS,
    UNTESTED,
    NothingToJudge,
    combine,
    cuda_rows,
    number,
    param,
    rows_ok,
    studies,
    untested,
    verdict,
)


def judge_agree(
    kind: str, pairs: dict[str, tuple[float, float]], rel: float, absolute: float = 0.0
) -> Check:
    """pairs: name -> (reference, other); FAIL on the first pair outside rel (+ absolute)."""
    worst = 0.0
    for name, (a, b) in pairs.items():
        if not math.isclose(a, b, rel_tol=rel, abs_tol=absolute):  # a NaN is never close
            return verdict(
                kind, False, f"{name}: {a:.6g} vs {b:.6g} (tolerance {100 * rel:g}% + {absolute:g})"
            )
        worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    if not pairs:
        return verdict(kind, False, "no pair to compare")
    return verdict(
        kind,
        True,
        f"{len(pairs)} figures agree (largest difference {100 * worst:.3f}%)",
        {"worst": worst},
    )


def backends_agree(folder: Path, rel: float = 1e-3) -> Check:
    """stnn's relation modes on one device: the same losses and forecast as dense (0.1%)."""
    by_device: dict[str, dict[str, dict]] = {}
    for r in rows_ok(folder):
        by_device.setdefault(r["device"], {})[param(r, "relations")] = r
    pairs = {}
    for device, rows in by_device.items():
        if "dense" not in rows or len(rows) < 2:
            raise NothingToJudge(
                f"{device}: needs dense and another relation mode, has {sorted(rows)}"
            )
        pairs.update(
            {
                f"{device} {name} {k}": (number(rows["dense"], k), number(r, k))
                for name, r in rows.items()
                if name != "dense"
                for k in ("final_train_loss", "val_value")
            }
        )
    return judge_agree("sparse-equals-dense", pairs, rel)


def judge_share(kind: str, label: str, share: float, low: float, high: float) -> Check:
    ok = low <= share <= high  # NaN fails too
    bounds = f"must be {100 * low:g}-{100 * high:g}%"
    return verdict(
        kind, ok, f"{label}: {100 * share:.1f}%" + ("" if ok else f" ({bounds})"), {"share": share}
    )


def phases_sum(folder: Path) -> Check:
    """cuda rows: train + eval phases (device events, no per-step sync) are 70-101% of the
    wall time."""
    return combine(
        "phases-sum",
        [
            judge_share(
                "phases-sum",
                f"{r['workload']} {r['run_id']} phases / wall time",
                (number(r, "train_s") + number(r, "eval_s")) / number(r, "wall_s"),
                0.7,
                1.01,
            )
            for r in cuda_rows(rows_ok(folder))
        ],
    )


def device_data(folder: Path, share: float = 0.02) -> Check:
    """dcrnn-pems gpu-index cuda rows: the data and h2d phases are at most 2% of the step time."""
    rows = [r for r in cuda_rows(rows_ok(folder)) if param(r, "batching") == "gpu-index"]
    if not rows:
        raise NothingToJudge("no gpu-index cuda row")
    r = rows[0]
    total = sum(number(r, k) for k in ("data_s", "h2d_s", "compute_s", "sync_s"))
    moved = (number(r, "data_s") + number(r, "h2d_s")) / total
    return judge_share(
        "dcrnn-device-data", "gpu-index data + h2d share of the step", moved, 0, share
    )


def judge_h2d(per_step_s: float, bare_copy_s: float, factor: float = 1.5) -> Check:
    """The h2d phase of a step cannot take less than a bare pinned copy of the same bytes
    (divided by `factor` for timer granularity): a shorter phase is an under-measurement."""
    text = (
        f"h2d {1e6 * per_step_s:.1f} us/step against {1e6 * bare_copy_s:.1f} us for a bare "
        "pinned copy"
    )
    ok = per_step_s * factor >= bare_copy_s
    return verdict(
        "h2d-plausible", ok, text + ("" if ok else f" / {factor}: the phase is under-measured")
    )


def pinned_copy_s(nbytes: int) -> float:
    """The fastest pinned copy of nbytes to the GPU, measured in a child process (`probe.py`) so
    that this process never holds a CUDA context beside the cells it runs."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.acceptance.probe", str(nbytes)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise NothingToJudge(
            "the pinned-copy probe failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
        )
    return float(proc.stdout.split()[-1])


def h2d_plausible(folder: Path) -> Check:
    """cnn-strain cuda rows: the h2d phase per step against a bare pinned copy of a batch."""
    (study,) = studies(folder)
    out = []
    for r in cuda_rows(rows_ok(folder), "cnn-strain"):
        batch_bytes = int(
            number(r, "data_mb") * 2**20 / param(r, "n_samples") * int(r["batch_size"])
        )
        steps = sum(e.steps for e in read_series(study, "epochs.csv") if e.run_id == r["run_id"])
        out.append(judge_h2d(number(r, "h2d_s") / steps, pinned_copy_s(batch_bytes)))
    return combine("h2d-plausible", out)


def judge_nvml(samples: list[SystemRow], energies: list[float]) -> Check:
    fields = ("gpu_util_pct", "gpu_mem_mb", "gpu_power_w")
    missing = sorted({f for s in samples for f in fields if getattr(s, f) is None})
    if not samples or missing:
        return verdict(
            "nvml",
            False,
            f"system.csv of the cuda cells: {len(samples)} samples, empty fields {missing}",
        )
    if not energies or not all(e > 0 for e in energies):
        return verdict("nvml", False, f"gpu_energy_j missing or zero in a cuda row: {energies}")
    joules = ", ".join(f"{e:.0f} J" for e in energies)
    return verdict(
        "nvml",
        True,
        f"{len(samples)} samples with NVML utilisation, memory and power; energy {joules}",
    )


def nvml(folder: Path) -> Check:
    """NVML utilisation, memory and power in every cuda cell's samples, energy in its row."""
    cuda = cuda_rows(rows_ok(folder))
    ids = {r["run_id"] for r in cuda}
    samples = [
        s for study in studies(folder) for s in read_series(study, "system.csv") if s.run_id in ids
    ]
    return judge_nvml(samples, [number(r, "gpu_energy_j") for r in cuda])


def judge_checkpoint(peaks: dict[str, float], rel: float = 0.02) -> Check:
    """full must lower the activation peak below none's; sqrt must lie between them (2% for the
    allocator's rounding), not strictly below none: with cnn-strain's 3 blocks a sqrt segment is
    ceil(sqrt(3)) = 2 blocks, the first two, which hold nearly every activation, so recomputing
    it in backward peaks where none does (the H100 measured none 3.1, sqrt 3.1, full 2.2 MiB)."""
    ok = (
        set(peaks) == {"none", "sqrt", "full"}
        and peaks["none"] > peaks["full"]
        and peaks["full"] <= peaks["sqrt"] <= peaks["none"] * (1 + rel)
    )
    text = "activation peak MiB " + ", ".join(f"{k} {v:.1f}" for k, v in peaks.items())
    return verdict(
        "checkpoint-lowers-peak",
        ok,
        text if ok else f"not none > full with sqrt between: {text}",
        peaks,
    )


def checkpoint(folder: Path) -> Check:
    """cnn-strain cuda cells at checkpoint none, sqrt, full: full lowers the activation peak the
    CUDA allocator measured, sqrt between the two (judge_checkpoint)."""
    rows = cuda_rows(rows_ok(folder))
    sources = {r["activation_source"] for r in rows}
    if sources != {"cuda allocator"}:
        return verdict(
            "checkpoint-lowers-peak",
            False,
            f"activation peaks not from the CUDA allocator: {sources}",
        )
    return judge_checkpoint({param(r, "checkpoint"): number(r, "activation_peak_mb") for r in rows})


def judge_tf32_peak(ran: list[tuple[str | None, str | None]]) -> Check:
    """(conv_math, peak_math) of cuda cells: a cell whose cuDNN ran at TF32 (its default for fp32
    RNNs and convolutions) divides by the GPU's measured TF32 peak. fp32 there means the peaks
    never measured TF32 (child/peaks.py measures it where Accelerator.tf32_matmul says it can)."""
    at = [peak for conv, peak in ran if conv == "tf32"]
    if not at:
        seen = sorted({str(conv) for conv, _ in ran})
        return verdict("tf32-peak", False, f"no cell ran cuDNN at TF32 (conv_math: {seen})")
    off = [str(p) for p in at if p != "tf32"]
    text = f"{len(at) - len(off)} of {len(at)} TF32 cells divided by the TF32 peak"
    return verdict(
        "tf32-peak", not off, text + (f"; the others by {sorted(set(off))}" if off else "")
    )


def tf32_peak(folder: Path) -> Check:
    """lstm-era5's cuda cells at precision=default: cuDNN's LSTM at TF32 (judge_tf32_peak)."""
    return judge_tf32_peak(
        [(r["conv_math"], r["peak_math"]) for r in cuda_rows(rows_ok(folder), "lstm-era5")]
    )


def judge_memory(
    ratios: dict[str, float], low: float = 0.5, high: float = 1.5, kind: str = "memory-prediction"
) -> Check:
    """name -> the allocator's peak / the memory model's prediction: each within low..high."""
    bad = {k: v for k, v in ratios.items() if not low <= v <= high}
    text = "GPU peak / predicted: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
    return verdict(
        kind,
        bool(ratios) and not bad,
        text + (f" (must be {low}-{high}x)" if bad else ""),
        ratios,
    )


def memory_prediction(folder: Path, may_skip: bool = False) -> Check:
    """stnn cuda rows: the allocator's peak within 0.5x..1.5x of the memory model's prediction
    (each named by its relations, and its batch where the rows have several)."""
    found = cuda_rows(rows_ok(folder, may_skip=may_skip), "stnn")
    batches = {number(r, "batch_size") for r in found}

    def name(r: Run) -> str:
        batch = f" at {number(r, 'batch_size'):,.0f} pairs" if len(batches) > 1 else ""
        return f"{param(r, 'relations')}{batch}"

    return judge_memory(
        {name(r): number(r, "peak_gpu_mb") / number(r, "predicted_mb") for r in found}
    )


def judge_worlds(rows: list[dict], backend: str) -> Check:
    """Cells of one backend (ok rows): multi-rank ddp/zero1 cells measured a sync, and the cells
    of one world (size, nodes) end at the same loss within 1%. No multi-rank cell: UNTESTED."""
    kind = f"distributed-{backend}"
    multi = [r for r in rows if r["backend"] == backend and int(r["world_size"]) > 1]
    if not multi and backend == "nccl":  # what one GPU cannot show: never a pass
        return untested(kind, "no nccl world of 2+ ranks ran here (NCCL needs one GPU per rank)")
    if not multi:
        return verdict(kind, False, f"no {backend} world of 2+ ranks ran: nothing was checked")
    quiet = [r["run_id"] for r in multi if r["strategy"] != "fsdp" and not number(r, "sync_s") > 0]
    if quiet:
        return verdict(kind, False, f"multi-rank ddp/zero1 cells without a measured sync: {quiet}")
    worlds: dict[tuple, list[dict]] = {}
    for r in multi:
        worlds.setdefault((r["world_size"], r["nodes"]), []).append(r)
    for world, cells in worlds.items():
        first = number(cells[0], "final_train_loss")
        pairs = {
            f"world {world} {r['strategy']}": (first, number(r, "final_train_loss")) for r in cells
        }
        agreed = judge_agree(kind, pairs, 1e-2)
        if agreed.status == FAIL:
            return agreed
    syncs = ", ".join(f"{1e3 * number(r, 'sync_s'):.0f} ms" for r in multi)
    return verdict(
        kind,
        True,
        f"{len(multi)} {backend} world(s) of 2+ ranks ok, sync {syncs}; losses agree "
        "within 1% per world",
    )


def distributed(folder: Path, backend: str = "gloo") -> Check:
    """ddp worlds of one backend on this GPU: every cell ok but NCCL's, skipped where it has fewer
    GPUs than ranks (or no NCCL), so with one GPU that check is UNTESTED, never a pass."""
    return judge_worlds(rows_ok(folder, may_skip_backend="nccl"), backend)


def doctor_checks(folder: Path) -> list[Check]:
    """`stbench doctor`'s own checks from its doctor.json (its SKIP is UNTESTED here)."""
    path = next(folder.glob("*/doctor.json"), folder / "doctor.json")  # doctor's own folder
    if not path.is_file():
        raise NothingToJudge(f"no doctor.json in {folder.name}")
    status = {"PASS": PASS, "FAIL": FAIL, "SKIP": UNTESTED, "UNSURE": FAIL}
    found = [
        Check(
            c["name"],
            c["device"],
            status.get(c["status"], FAIL),
            c["detail"] + ("" if c.get("seconds") is None else f" ({c['seconds']:.1f} s)"),
            {},
        )
        for c in json.loads(path.read_text())["checks"]
    ]
    if not found:
        raise NothingToJudge("doctor.json holds no check")
    return found


def judge_warm(fresh: list[str], cells: int) -> Check:
    """Single-process cells forked from the warm server against those that started a process of
    their own: each of those imports torch again (~3.3 s on the H200's host), which a step's cap
    for warm cells does not hold. On the H200 run every cell after the first profile step
    started fresh (an environment variable torch set in the acceptance's process)."""
    if not cells:
        return verdict("warm-cells", False, "no single-process cell to look at")
    told = f"{cells - len(fresh)} of {cells} single-process cells forked from the warm server"
    return verdict(
        "warm-cells",
        not fresh,
        told + (f"; started a process of their own: {', '.join(fresh)}" if fresh else ""),
        {"fresh": len(fresh)},
    )


def warm_cells(folder: Path) -> Check:
    """Each single-process cell of a step: its log says whether it was forked (runner/warm.py's
    first line of a forked cell's log)."""
    from stbench.runner.warm import FORKED

    fresh, cells = [], 0
    for r in rows_ok(folder):
        if (r["world_size"] or 1) > 1:
            continue  # a torchrun world starts its ranks fresh
        logs = [s / "logs" / f"{r['run_id']}.log" for s in studies(folder)]
        log = next((x for x in logs if x.is_file()), None)
        if log is None:
            raise NothingToJudge(f"no log of {r['run_id']}")
        cells += 1
        if FORKED not in log.read_text(errors="replace"):
            fresh.append(r["run_id"])
    return judge_warm(fresh, cells)
