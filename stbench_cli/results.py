"""The normalized result files: manifest.json, runs.csv, epochs.csv, system.csv.

Files are only ever appended to, one finished cell at a time, and each write replaces the
file atomically (write a temporary file, fsync, rename), so a kill at any moment leaves
either the old or the new file, never a torn one. runs.csv is written last: a cell is
done exactly when its row is there, and epoch/system rows of a cell without one (a kill
between two writes) are dropped before a resume re-runs it.

No pandas or torch here: the engine's parent stays light, and `compare` (tables.py) reads
these files through `read_runs`.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from .errors import StbenchError

SCHEMA = 1
RUN_COLUMNS = [
    "schema", "run_id", "workload", "device", "device_name", "strategy", "world_size", "nodes",
    "batch_size", "global_batch_size", "epochs", "repeat", "seed", "preset", "params", "data_source",
    "status", "reason",
    "wall_s", "setup_s", "train_s", "epoch_s", "samples_per_s", "warmup_steps",
    "data_s", "h2d_s", "compute_s", "sync_s", "eval_s",
    "peak_rss_mb", "peak_gpu_mb", "data_mb",
    "final_train_loss", "val_metric", "val_value", "naive_baseline",
    "flops_per_sample", "achieved_gflops", "peak_gflops", "peak_fraction",
    "gpu_energy_j", "cpu_energy_j",
    "host", "cpu_model", "threads", "gpu_count", "torch", "cuda", "nccl",
    # added later; a runs.csv written before keeps its own header (see append)
    "steps_per_s", "stream_s", "stream_mb", "predicted_mb", "base_rss_mb",
]
EPOCH_COLUMNS = ["run_id", "epoch", "epoch_s", "train_s", "data_s", "h2d_s", "compute_s", "sync_s",
                 "eval_s", "steps", "train_loss", "val_metric"]
SYSTEM_COLUMNS = ["run_id", "t_s", "proc_cpu_pct", "proc_rss_mb", "sys_cpu_pct", "sys_mem_pct",
                  "gpu_util_pct", "gpu_mem_mb", "gpu_power_w"]
FILES = {"runs.csv": RUN_COLUMNS, "epochs.csv": EPOCH_COLUMNS, "system.csv": SYSTEM_COLUMNS}


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _csv_text(rows: list[dict], columns: list[str], header: bool) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buf.getvalue()


def append(path: Path, rows: list[dict], columns: list[str]) -> None:
    """Append rows to a CSV by rewriting it atomically. Rows follow the file's own header, so
    resuming a study written by an older stbench (fewer columns) keeps every line aligned."""
    old = path.read_text() if path.exists() else ""
    if old:
        columns = next(csv.reader([old.split("\n", 1)[0]]))
    _atomic_write(path, old + _csv_text(rows, columns, header=not old))


def write_cell(folder: Path, run_row: dict, epoch_rows: list[dict], system_rows: list[dict]) -> None:
    """Record one finished cell; runs.csv last, so the row marks the cell as done."""
    append(folder / "epochs.csv", epoch_rows, EPOCH_COLUMNS)
    append(folder / "system.csv", system_rows, SYSTEM_COLUMNS)
    append(folder / "runs.csv", [run_row], RUN_COLUMNS)


def read_csv(path: Path, required: list[str]) -> list[dict]:
    """Rows of a results CSV; StbenchError naming the file if it is missing or corrupt."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise StbenchError(f"results file {path} is corrupt: header lacks {', '.join(missing[:5])}; "
                                   f"expected stbench columns ({', '.join(required[:4])}, …)")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise StbenchError(f"results file {path} cannot be read ({exc})") from None
    for i, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            raise StbenchError(f"results file {path} is corrupt: line {i} has the wrong number of fields")
    return rows


def read_runs(folder: Path) -> list[dict]:
    path = folder / "runs.csv"
    if not path.exists():
        raise StbenchError(f"{folder} is not a result folder: it has no runs.csv")
    rows = read_csv(path, ["schema", "run_id", "workload", "device", "status"])
    for row in rows:
        if row["schema"] != str(SCHEMA):
            raise StbenchError(f"{path}: schema {row['schema']!r} is not one this stbench reads (schema {SCHEMA})")
    return rows


def done_ids(folder: Path) -> set[str]:
    path = folder / "runs.csv"
    return {r["run_id"] for r in read_runs(folder)} if path.exists() else set()


def prune_orphans(folder: Path) -> None:
    """Drop epoch/system rows whose cell has no runs.csv row (the parent died mid-write)."""
    done = done_ids(folder)
    for name in ("epochs.csv", "system.csv"):
        path = folder / name
        if path.exists():
            rows = read_csv(path, ["run_id"])
            kept = [r for r in rows if r["run_id"] in done]
            if len(kept) != len(rows):
                _atomic_write(path, _csv_text(kept, FILES[name], header=True))


def write_manifest(folder: Path, manifest: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _atomic_write(folder / "manifest.json", json.dumps(manifest, indent=1, default=str))


def read_manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise StbenchError(f"{folder} has no manifest.json: not a stbench result folder") from None
    except (OSError, ValueError) as exc:
        raise StbenchError(f"{path} is corrupt ({exc}); it must be the JSON stbench wrote") from None
    if not isinstance(manifest, dict) or "cells" not in manifest or "workload" not in manifest:
        raise StbenchError(f"{path} is corrupt: it lacks the 'workload' and 'cells' of the matrix")
    return manifest
