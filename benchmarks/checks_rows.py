"""The GPU acceptance's checks on rows: agreement between devices and backends, phases, data
and h2d (gpu_checks.py is their command line; checks_traces.py has those on traces and worlds).

Every check reads real rows or traces and is split into a reader and a pure judge over the
numbers read, so that tests/test_acceptance_script.py can feed each judge numbers that must
fail it. A folder whose cells did not end ok fails every check (never a false pass), with the
cells' reasons: in a rehearsal on a CPU build that is the build's own CUDA error.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from stbench.report.profile import syncs_per_step
from stbench.store.files import read_runs
from stbench.store.results import read_series

class Fail(Exception):
    """The check ran and its figure is outside what must hold."""


class Untested(Exception):
    """The check cannot be made on this machine; the reason says why."""


def _ok(folder: Path, may_skip: str = "") -> list[dict]:
    """The folder's rows, all ended ok (or skipped for a reason containing `may_skip`)."""
    rows = read_runs(folder)
    if not rows:
        raise Fail(f"no rows in {folder}")
    bad = [f"{r['run_id']}: {r['status']} {r['reason']}" for r in rows
           if r["status"] != "ok" and not (may_skip and r["status"] == "skipped" and may_skip in r["reason"])]
    if bad:
        raise Fail("cells did not end ok: " + "; ".join(bad))
    return [r for r in rows if r["status"] == "ok"]


def _f(row: dict, key: str) -> float:
    try:
        return float(row.get(key) or "nan")
    except ValueError:
        return math.nan


def _cuda(rows: list[dict], workload: str = "") -> list[dict]:
    out = [r for r in rows if r["device"].startswith("cuda") and workload in r["workload"]]
    if not out:
        raise Fail(f"no {workload + ' ' if workload else ''}cuda row")
    return out


def _param(row: dict, name: str):
    return json.loads(row["params"] or "{}").get(name)


# --- agreement ------------------------------------------------------------------------------

def judge_agree(pairs: dict[str, tuple[float, float]], rel: float, absolute: float = 0.0) -> float:
    """pairs: name -> (reference, other); fails on the first pair outside rel (+ absolute)."""
    worst = 0.0
    for name, (a, b) in pairs.items():
        if not math.isclose(a, b, rel_tol=rel, abs_tol=absolute):  # a NaN is never close
            raise Fail(f"{name}: {a:.6g} vs {b:.6g} (tolerance {100 * rel:g}% + {absolute:g})")
        worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    return worst


def cpu_gpu_agree(folder: Path, rel: float = 0.05, absolute: float = 1e-4) -> str:
    """The same smoke cells on cpu and cuda: final train loss and validation metric within 5%
    (+1e-4): same seed and data; cuDNN's TF32 and non-deterministic reductions differ."""
    cells: dict[tuple, dict[str, dict]] = {}
    for r in _ok(folder):
        cells.setdefault((r["strategy"], r["batch_size"], r["epochs"], r["params"]), {})[r["device"].split(":")[0]] = r
    found = [c for c in cells.values() if {"cpu", "cuda"} <= set(c)]
    if not found:
        raise Fail("no cell ran on both cpu and cuda")
    pairs = {f"{k} cell {i}": (_f(c["cpu"], k), _f(c["cuda"], k))
             for i, c in enumerate(found) for k in ("final_train_loss", "val_value")}
    worst = judge_agree(pairs, rel, absolute)
    return f"{len(found)} cell(s): cpu and cuda agree on loss and metric (largest difference {100 * worst:.2f}%)"


def backends_agree(folder: Path, rel: float = 1e-3) -> str:
    """stnn's relation backends on one device: the same losses and forecast as dense."""
    by_device: dict[str, dict[str, dict]] = {}
    for r in _ok(folder):
        by_device.setdefault(r["device"], {})[_param(r, "relations")] = r
    pairs = {}
    for device, rows in by_device.items():
        if "dense" not in rows or len(rows) < 2:
            raise Fail(f"{device}: needs dense and another relation mode, has {sorted(rows)}")
        pairs.update({f"{device} {name} {k}": (_f(rows["dense"], k), _f(r, k))
                      for name, r in rows.items() if name != "dense" for k in ("final_train_loss", "val_value")})
    worst = judge_agree(pairs, rel)
    return f"relation modes agree with dense within {100 * worst:.3f}% (limit {100 * rel:g}%)"


# --- phases and data ------------------------------------------------------------------------

def judge_share(name: str, share: float, low: float, high: float) -> str:
    if not low <= share <= high:  # NaN fails too
        raise Fail(f"{name}: {100 * share:.1f}% (must be {100 * low:g}-{100 * high:g}%)")
    return f"{100 * share:.1f}%"


def phases_sum(folder: Path) -> str:
    """cuda rows: train + eval phases (device events, no per-step sync) are 70-101% of the wall time."""
    shares = [judge_share(f"{r['workload']} {r['run_id']} phases / wall",
                          (_f(r, "train_s") + _f(r, "eval_s")) / _f(r, "wall_s"), 0.7, 1.01)
              for r in _cuda(_ok(folder))]
    return f"phases / wall time: {', '.join(shares)} in {len(shares)} cuda row(s)"


def device_data(folder: Path, share: float = 0.02) -> str:
    """dcrnn-pems gpu-index: the data and h2d phases are at most 2% of the step time."""
    rows = [r for r in _ok(folder) if _param(r, "batching") == "gpu-index"]
    if not rows:
        raise Fail("no gpu-index row")
    r = rows[0]
    total = sum(_f(r, k) for k in ("data_s", "h2d_s", "compute_s", "sync_s"))
    moved = judge_share("gpu-index data + h2d share of the step", (_f(r, "data_s") + _f(r, "h2d_s")) / total, 0, share)
    return f"gpu-index: data + h2d = {moved} of its steps"


def judge_h2d(per_step_s: float, bare_copy_s: float, factor: float = 1.5) -> str:
    """The h2d phase of a step cannot take less than a bare pinned copy of the same bytes
    (divided by `factor` for timer granularity): a shorter phase is an under-measurement."""
    if not per_step_s * factor >= bare_copy_s:
        raise Fail(f"h2d phase {1e6 * per_step_s:.1f} us/step is under a bare pinned copy of the batch "
                   f"({1e6 * bare_copy_s:.1f} us) / {factor}: the phase is under-measured")
    return f"h2d {1e6 * per_step_s:.1f} us/step against {1e6 * bare_copy_s:.1f} us for a bare pinned copy"


def pinned_copy_s(nbytes: int, repeats: int = 20) -> float:
    """The fastest of `repeats` pinned host-to-device copies of nbytes, on the device's clock."""
    import torch

    from stbench.device import Accelerator

    accel = Accelerator("cuda")
    accel.select()
    host = torch.empty(max(nbytes, 1), dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(host, device=accel.torch)
    best = math.inf
    for _ in range(repeats):
        start, end = accel.event(), accel.event()
        start.record()
        dev.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, accel.elapsed_s(start, end))
    return best


def h2d_plausible(folder: Path) -> str:
    """cnn-strain cuda rows: the h2d phase per step against a bare pinned copy of a batch."""
    rows = _cuda(_ok(folder), "cnn-strain")
    out = []
    for r in rows:
        batch_bytes = int(_f(r, "data_mb") * 2**20 / _param(r, "n_samples") * int(r["batch_size"]))
        steps = sum(int(e["steps"]) for e in read_series(folder, "epochs.csv") if e["run_id"] == r["run_id"])
        out.append(judge_h2d(_f(r, "h2d_s") / steps, pinned_copy_s(batch_bytes)))
    return "; ".join(out)
