"""Checks of `benchmarks/gpu_acceptance.sh` on result folders (pure reading of runs.csv and
profile traces; exits 1 with the reason when a check fails).

    python benchmarks/gpu_checks.py backends-agree FOLDER      stnn relation backends: same losses and forecast
    python benchmarks/gpu_checks.py device-data FOLDER         dcrnn gpu-index: data and h2d shares near zero
    python benchmarks/gpu_checks.py no-syncs FOLDER            profiled steps: no host-device synchronisation
    python benchmarks/gpu_checks.py distributed FOLDER         ddp/zero1/fsdp worlds on the GPU: rows ok (NCCL
                                                               worlds wider than the GPUs skipped), syncs
                                                               measured, every strategy the same loss
    python benchmarks/gpu_checks.py checkpoint FOLDER          activation peak (CUDA allocator): none > sqrt > full
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from stbench.report.syncs import syncs_per_step
from stbench.store.files import read_runs


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


if __name__ == "__main__":
    check = {"backends-agree": backends_agree, "device-data": device_data, "no-syncs": no_syncs,
             "distributed": distributed, "checkpoint": checkpoint}[sys.argv[1]]
    print(check(Path(sys.argv[2])))
