"""Checks of `benchmarks/gpu_acceptance.sh` on result folders (pure reading of runs.csv and
profile traces; exits 1 with the reason when a check fails).

    python benchmarks/gpu_checks.py backends-agree FOLDER      stnn relation backends: same losses and forecast
    python benchmarks/gpu_checks.py device-data FOLDER         dcrnn gpu-index: data and h2d shares near zero
    python benchmarks/gpu_checks.py no-syncs FOLDER            profiled steps: no host-device synchronisation
    python benchmarks/gpu_checks.py distributed FOLDER         ddp/zero1/fsdp worlds on the GPU: rows ok (NCCL
                                                               worlds wider than the GPUs skipped), syncs
                                                               measured, every strategy the same loss
    python benchmarks/gpu_checks.py checkpoint FOLDER          activation peak (CUDA allocator): none > sqrt > full
    python benchmarks/gpu_checks.py cpu-gpu-agree FOLDER       the same smoke cells on cpu and cuda: final train loss
                                                               and validation metric within 5% relative (+ 1e-4
                                                               absolute): same seed and data; cuDNN's TF32 and
                                                               non-deterministic reductions are all that differ
    python benchmarks/gpu_checks.py nvml FOLDER                NVML utilisation, memory and power in every cuda
                                                               cell's system.csv samples, energy in its row
    python benchmarks/gpu_checks.py phases-sum FOLDER          cuda rows: train + eval phases (device events, no
                                                               per-step sync) between 70% and 101% of the wall time
    python benchmarks/gpu_checks.py syncs FOLDER [MAX]         profiled steps: host-device syncs per step (fails above MAX)
    python benchmarks/gpu_checks.py offload-hidden FOLDER      stnn offload profile: >= 50% of the host-to-device copy
                                                               time overlaps kernels on another stream
    python benchmarks/gpu_checks.py memory-prediction FOLDER   stnn cuda rows: peak_gpu_mb within 0.5x..1.5x of
                                                               the memory model's predicted_mb
    python benchmarks/gpu_checks.py h2d-plausible FOLDER       cnn-strain cuda rows: the bandwidth implied by h2d_s
                                                               is at most 1.5x the pinned copy bandwidth measured here
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from stbench.report.syncs import syncs_per_step
from stbench.store.files import read_runs
from stbench.store.results import read_series


def _ok(folder: Path) -> list[dict]:
    rows = read_runs(folder)
    bad = [f"{r['run_id']}: {r['status']} {r['reason']}" for r in rows if r["status"] != "ok"]
    if bad:
        raise SystemExit("cells did not end ok: " + "; ".join(bad))
    return rows


def backends_agree(folder: Path, rel: float = 1e-3) -> str:
    by_device: dict[str, dict[str, dict]] = {}
    for r in _ok(folder):
        by_device.setdefault(r["device"], {})[json.loads(r["params"])["relations"]] = r
    for device, rows in by_device.items():
        base = rows["dense"]
        for name, r in rows.items():
            for key in ("final_train_loss", "val_value"):
                a, b = float(r[key]), float(base[key])
                if not math.isclose(a, b, rel_tol=rel):
                    raise SystemExit(f"{device} {name}: {key} {a} differs from dense's {b} (rel {rel})")
    return f"relations agree within rel {rel}: " + ", ".join(sorted(next(iter(by_device.values()))))


def device_data(folder: Path, share: float = 0.02) -> str:
    for r in _ok(folder):
        if json.loads(r["params"])["batching"] == "gpu-index":
            total = sum(float(r[k]) for k in ("data_s", "h2d_s", "compute_s", "sync_s"))
            moved = (float(r["data_s"]) + float(r["h2d_s"])) / total
            if moved > share:
                raise SystemExit(f"gpu-index spends {100 * moved:.1f}% of its steps in data + h2d (> {100 * share:.0f}%)")
            return f"gpu-index: data + h2d = {100 * moved:.2f}% of its steps"
    raise SystemExit("no gpu-index row")


def no_syncs(folder: Path) -> str:
    counts = {}
    for r in _ok(folder):
        per_step = syncs_per_step(folder / "profile" / r["run_id"] / "trace.json")
        counts[r["run_id"]] = sum(len(v) for v in per_step.values())
    if any(counts.values()):
        raise SystemExit(f"host-device synchronisations inside profiled steps: {counts}")
    return f"no host-device synchronisation in the profiled steps of {len(counts)} cell(s)"


def distributed(folder: Path, rel: float = 1e-2) -> str:
    rows = read_runs(folder)
    bad = [f"{r['run_id']}: {r['status']} {r['reason']}" for r in rows
           if r["status"] != "ok" and not (r["status"] == "skipped" and "GPUs" in r["reason"])]
    if bad:
        raise SystemExit("cells did not end ok: " + "; ".join(bad))
    ok = [r for r in rows if r["status"] == "ok"]
    quiet = [r["run_id"] for r in ok if int(r["world_size"]) > 1 and r["strategy"] != "fsdp" and not float(r["sync_s"]) > 0]
    if quiet:
        raise SystemExit(f"multi-rank ddp/zero1 cells without a measured sync: {quiet}")
    losses: dict[tuple, dict[str, float]] = {}
    for r in ok:
        losses.setdefault((r["world_size"], r["nodes"]), {})[f"{r['strategy']}/{r['backend']}"] = float(r["final_train_loss"])
    for world, by in losses.items():
        first = next(iter(by.values()))
        if any(not math.isclose(v, first, rel_tol=rel) for v in by.values()):
            raise SystemExit(f"world {world}: strategies and backends disagree on the final loss: {by}")
    return f"{len(ok)} distributed cells ok; final losses agree within rel {rel} per world: {losses}"


def checkpoint(folder: Path) -> str:
    peaks = {json.loads(r["params"])["checkpoint"]: (float(r["activation_peak_mb"]), r["activation_source"])
             for r in _ok(folder)}
    if any(source != "cuda allocator" for _, source in peaks.values()):
        raise SystemExit(f"activation peaks not from the CUDA allocator: {peaks}")
    if not peaks["none"][0] > peaks["sqrt"][0] > peaks["full"][0]:
        raise SystemExit(f"checkpointing did not lower the activation peak: {peaks}")
    return "activation peak MiB " + ", ".join(f"{k} {v:.1f}" for k, (v, _) in peaks.items())


def _f(row: dict, key: str) -> float:
    try:
        return float(row.get(key) or "nan")
    except ValueError:
        return math.nan


def cpu_gpu_agree(folder: Path, rel: float = 0.05, absolute: float = 1e-4) -> str:
    rows = _ok(folder)
    cells: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        cells.setdefault((r["strategy"], r["batch_size"], r["epochs"], r["params"]), {})[r["device"].split(":")[0]] = r
    pairs = [c for c in cells.values() if {"cpu", "cuda"} <= set(c)]
    if not pairs:
        raise SystemExit("no cell ran on both cpu and cuda")
    worst = 0.0
    for c in pairs:
        for key in ("final_train_loss", "val_value"):
            a, b = _f(c["cpu"], key), _f(c["cuda"], key)
            if not math.isclose(a, b, rel_tol=rel, abs_tol=absolute):
                raise SystemExit(f"{key}: cpu {a:.6g} vs cuda {b:.6g} (tolerance {100 * rel:.0f}% + {absolute})")
            worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    return f"{len(pairs)} cell(s): cpu and cuda agree on loss and metric (largest difference {100 * worst:.2f}%)"


def nvml(folder: Path) -> str:
    cuda = [r for r in _ok(folder) if r["device"].startswith("cuda")]
    if not cuda:
        raise SystemExit("no cuda row")
    samples = [s for s in read_series(folder, "system.csv") if s["run_id"] in {r["run_id"] for r in cuda}]
    fields = ("gpu_util_pct", "gpu_mem_mb", "gpu_power_w")
    missing = sorted({f for s in samples for f in fields if s.get(f) in (None, "")})
    if not samples or missing:
        raise SystemExit(f"system.csv of the cuda cells: {len(samples)} samples, empty fields {missing}")
    energy = [_f(r, "gpu_energy_j") for r in cuda]
    if not all(e > 0 for e in energy):
        raise SystemExit(f"gpu_energy_j missing or zero in a cuda row: {energy}")
    return f"{len(samples)} samples with NVML utilisation, memory and power; energy {', '.join(f'{e:.0f} J' for e in energy)}"


def phases_sum(folder: Path) -> str:
    shares = []
    for r in _ok(folder):
        if r["device"].startswith("cuda"):
            share = (_f(r, "train_s") + _f(r, "eval_s")) / _f(r, "wall_s")
            if not 0.7 <= share <= 1.01:
                raise SystemExit(f"{r['workload']} {r['run_id']}: phases are {100 * share:.1f}% of the wall time")
            shares.append(share)
    if not shares:
        raise SystemExit("no cuda row")
    return f"phases sum to {100 * min(shares):.1f}-{100 * max(shares):.1f}% of the wall time in {len(shares)} cuda row(s)"


def syncs(folder: Path, most: float = math.inf) -> str:
    out = []
    for r in _ok(folder):
        per_step = syncs_per_step(folder / "profile" / r["run_id"] / "trace.json")
        worst = max((len(v) for v in per_step.values()), default=0)
        out.append(f"{r['workload']} {json.loads(r['params']).get('relations', '')} {worst} max/step".replace("  ", " "))
        if worst > most:
            raise SystemExit(f"{out[-1]}: more than {most:g} host-device syncs in a profiled step")
    return "host-device syncs per profiled step: " + "; ".join(out)


def _intervals(events: list[dict], cat: str, name: str = "") -> list[tuple[float, float, object]]:
    return [(e["ts"], e["ts"] + e.get("dur", 0), e.get("tid")) for e in events
            if e.get("cat") == cat and name in str(e.get("name", ""))]


def offload_hidden(folder: Path, least: float = 0.5) -> str:
    (row,) = _ok(folder)
    events = json.loads((folder / "profile" / row["run_id"] / "trace.json").read_text())["traceEvents"]
    copies, kernels = _intervals(events, "gpu_memcpy", "HtoD"), _intervals(events, "kernel")
    total = sum(b - a for a, b, _ in copies)
    if total <= 0:
        raise SystemExit("no host-to-device copy in the trace")
    hidden = 0.0
    for a, b, stream in copies:  # the part of each copy that some kernel on another stream overlaps
        spans = sorted((max(a, x), min(b, y)) for x, y, t in kernels if t != stream and x < b and y > a)
        end = a
        for x, y in spans:
            hidden += max(0.0, y - max(x, end))
            end = max(end, y)
    share = hidden / total
    if share < least:
        raise SystemExit(f"only {100 * share:.0f}% of {total / 1e3:.1f} ms of copies overlap compute (< {100 * least:.0f}%)")
    return f"{100 * share:.0f}% of {total / 1e3:.1f} ms of host-to-device copies hidden behind compute"


def memory_prediction(folder: Path, low: float = 0.5, high: float = 1.5) -> str:
    out = []
    for r in _ok(folder):
        if r["device"].startswith("cuda") and r["workload"] == "stnn":
            ratio = _f(r, "peak_gpu_mb") / _f(r, "predicted_mb")
            relations = json.loads(r["params"])["relations"]
            if not low <= ratio <= high:
                raise SystemExit(f"stnn {relations}: peak {_f(r, 'peak_gpu_mb'):.0f} MiB is {ratio:.2f}x the prediction")
            out.append(f"{relations} {ratio:.2f}x")
    if not out:
        raise SystemExit("no stnn cuda row")
    return "stnn GPU peak / predicted: " + ", ".join(out)


def pinned_h2d_gbps(mib: int = 256) -> float:
    import torch

    host = torch.empty(mib * 2**20, dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    best = math.inf
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dev.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return host.numel() / best / 1e9


def h2d_plausible(folder: Path, factor: float = 1.5) -> str:
    bus = pinned_h2d_gbps()
    out = []
    for r in _ok(folder):
        if r["device"].startswith("cuda") and r["workload"] == "cnn-strain":
            params = json.loads(r["params"])
            per_sample = _f(r, "data_mb") * 2**20 / params["n_samples"]
            steps = sum(int(e["steps"]) for e in read_series(folder, "epochs.csv") if e["run_id"] == r["run_id"])
            moved = steps * int(r["batch_size"]) * per_sample
            implied = moved / _f(r, "h2d_s") / 1e9
            if not implied <= factor * bus:
                raise SystemExit(f"h2d_s {_f(r, 'h2d_s'):.4f} s implies {implied:.1f} GB/s, over {factor}x the "
                                 f"{bus:.1f} GB/s a pinned copy measures here")
            out.append(f"{implied:.2f} GB/s")
    if not out:
        raise SystemExit("no cnn-strain cuda row")
    return f"h2d implies {', '.join(out)} against {bus:.1f} GB/s measured for a pinned copy"


CHECKS = {"backends-agree": backends_agree, "device-data": device_data, "no-syncs": no_syncs,
          "distributed": distributed, "checkpoint": checkpoint, "cpu-gpu-agree": cpu_gpu_agree, "nvml": nvml,
          "phases-sum": phases_sum, "syncs": syncs, "offload-hidden": offload_hidden,
          "memory-prediction": memory_prediction, "h2d-plausible": h2d_plausible}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in CHECKS:
        raise SystemExit(f"usage: gpu_checks.py CHECK FOLDER [ARG]; checks: {', '.join(CHECKS)}")
    extra = [float(a) for a in sys.argv[3:]]
    print(CHECKS[sys.argv[1]](Path(sys.argv[2]), *extra))
