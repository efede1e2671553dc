"""Checks of `benchmarks/gpu_acceptance.sh` on result folders (pure reading of runs.csv and
profile traces; exits 1 with the reason when a check fails).

    python benchmarks/gpu_checks.py backends-agree FOLDER      stnn relation backends: same losses and forecast
    python benchmarks/gpu_checks.py device-data FOLDER         dcrnn gpu-index: data and h2d shares near zero
    python benchmarks/gpu_checks.py no-syncs FOLDER            profiled steps: no host-device synchronisation
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


if __name__ == "__main__":
    check = {"backends-agree": backends_agree, "device-data": device_data, "no-syncs": no_syncs}[sys.argv[1]]
    print(check(Path(sys.argv[2])))
