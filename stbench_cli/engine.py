"""The engine's face to the CLI: plan a study, then execute it with progress."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import envinfo, results, study
from .errors import StbenchError
from .matrix import run_matrix
from .spec import skip_reason


def plan_new(workload: str, **options) -> study.Plan:
    return study.plan_new(workload, env=envinfo.collect(), **options)


def plan_resume(workload: str, folder: Path) -> study.Plan:
    return study.plan_resume(workload, folder)


def prepare_data(workload: str, *, out: Path | None, **options) -> Path:
    """Cache a selection of a workload's data as a local store (one clear line on failure)."""
    w = study.get_workload(workload)
    if out is None:
        name = f"{w.name}-{options['start']}-{options['end']}".replace(":", "")
        out = envinfo.cache_dir() / "data" / f"{name}.zarr"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        return w.prepare(out=out, **options)
    except ValueError as exc:
        raise StbenchError(str(exc)) from None


def execute(plan: study.Plan, timeout: float | None, progress: Callable, warn: Callable[[str], None]) -> list[dict]:
    """Write the manifest (new studies), run every missing cell, return all rows of the folder."""
    env = envinfo.collect()
    reasons = {c: skip_reason(c, env.gpu_count, plan.workload.strategies) for c in plan.cells}
    for reason in sorted({r for r in reasons.values() if r}):
        warn(f"skipping cells: {reason}")
    devices = sorted({c.device for c, r in reasons.items() if not r})
    peaks = envinfo.peaks(env, devices)
    if not (plan.folder / "manifest.json").exists():
        results.write_manifest(plan.folder, {**plan.manifest, "peaks": peaks, "timeout_s": timeout})
    done = len(results.done_ids(plan.folder) & {c.run_id for c in plan.cells})
    with progress(len(plan.cells), done) as (on_start, on_done):
        run_matrix(list(plan.cells), plan.folder, env, plan.workload.strategies, timeout=timeout, peaks=peaks,
                   on_start=on_start, on_done=on_done)
    return results.read_runs(plan.folder)
