"""The CPU side of cpu-gpu-agree, computed beforehand on a CPU machine and carried in the wheel
(`cpu_reference.json`), so that the GPU run trains only the cuda cells of its smoke steps.

    python -m benchmarks.acceptance --cpu-reference      rewrites it from this machine

The smoke cells are small and seeded: the same cell trains to the same loss on any CPU within a
fraction of a percent (thread counts change float summation order), far inside the 5% that cpu
and cuda may differ by. A test plans every smoke step again and fails when a cell has no twin
here (a smoke preset changed: rewrite the file)."""

from __future__ import annotations

import json
import platform
import tempfile
from pathlib import Path

from stbench.runner.doctor import Check
from stbench.store.files import read_runs

from .checks_rows import judge_agree
from .verdicts import NothingToJudge, cuda_rows, number, rows_ok

REFERENCE = Path(__file__).with_name("cpu_reference.json")
KEY = ("workload", "strategy", "world_size", "batch_size", "epochs", "seed", "params")
FIGURES = ("final_train_loss", "val_value")


def carried(row) -> dict[str, str]:
    """A run's identity without its device and its figures as the file carries them: text as
    runs.csv holds it (its params JSON with sorted keys)."""
    return {
        k: json.dumps(dict(row.params), sort_keys=True) if k == "params" else str(row[k])
        for k in (*KEY, *FIGURES)
    }


def key(row: dict) -> str:
    """A carried row's identity (or an Identity's fields: params as runs.csv writes them)."""
    return "|".join(str(row[k]) for k in KEY)


def load(path: Path = REFERENCE) -> dict[str, dict]:
    if not path.is_file():
        raise NothingToJudge(f"no CPU reference at {path}")
    return {key(r): r for r in json.loads(path.read_text())["rows"]}


def cpu_gpu_agree(
    folder: Path, reference: Path = REFERENCE, rel: float = 0.05, absolute: float = 1e-4
) -> Check:
    """Every cuda cell against its CPU twin in the reference: final train loss and validation
    metric within 5% (+1e-4): same seed and data; cuDNN's TF32 and non-deterministic reductions
    differ. A cell without a twin fails (the reference is stale: rewrite it)."""
    cells = cuda_rows(rows_ok(folder))
    ref = load(reference)
    pairs = {}
    for r in cells:
        twin = ref.get(key(carried(r)))
        if twin is None:
            raise NothingToJudge(
                f"{r['workload']} cell {r['run_id']} has no CPU twin in {reference.name}: "
                "rewrite it with `python -m benchmarks.acceptance --cpu-reference`"
            )
        pairs.update(
            {f"{r['workload']} {r['run_id']} {k}": (float(twin[k]), number(r, k)) for k in FIGURES}
        )
    check = judge_agree("cpu-gpu-agree", pairs, rel, absolute)
    return Check(
        check.name,
        check.device,
        check.status,
        f"cuda vs the carried CPU rows: {check.detail}",
        check.figures,
    )


def reference_rows(folders: list[Path]) -> list[dict]:
    """The ok cpu rows of studies, reduced to their identity and the figures compared."""
    rows = [r for f in folders for r in read_runs(f) if r["device"] == "cpu"]
    bad = [f"{r['workload']}: {r['status']} {r['reason']}" for r in rows if r["status"] != "ok"]
    if bad or not rows:
        raise SystemExit(f"the CPU reference needs every smoke cell ok: {bad or 'no rows'}")
    return [carried(r) for r in rows]


def write(path: Path, rows: list[dict], made_by: str, torch_version: str) -> None:
    note = {
        "made_by": made_by,
        "python": platform.python_version(),
        "torch": torch_version,
        "machine": platform.processor() or platform.machine(),
        "rows": rows,
    }
    path.write_text(json.dumps(note, indent=1, sort_keys=True) + "\n")


def make(steps, run_stbench, path: Path = REFERENCE) -> Path:
    """Run every smoke step's cells on this CPU (`run_stbench(argv) -> exit code`) and write the
    reference. steps: the smoke steps, whose `cpu_argv` is their command on the CPU."""
    import torch

    with tempfile.TemporaryDirectory(prefix="stbench-cpu-reference-") as tmp:
        folders = []
        for step in steps:
            out = Path(tmp) / step.name
            code = run_stbench((*step.cpu_argv, "--out", str(out)))
            if code != 0:
                raise SystemExit(f"{step.name} on the CPU exited {code}")
            folders += sorted(p.parent for p in out.glob("*/runs.csv"))
        write(
            path,
            reference_rows(folders),
            "python -m benchmarks.acceptance --cpu-reference",
            torch.__version__,
        )
    return path
