"""The engine's face to the CLI: plan a study, then execute it with progress."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import envinfo, results, study
from .errors import StbenchError
from .matrix import cell_skip, run_matrix


def plan_new(workload: str, **options) -> study.Plan:
    return study.plan_new(workload, env=envinfo.collect(), **options)


def plan_profile(workload: str, *, devices, batch_sizes, sets, offload: bool, steps: int, preset: str | None,
                 smoke: bool, seed: int, out: Path) -> study.Plan:
    """One epoch cut to the warm-up plus `steps` steady steps, one repeat."""
    if steps < 1:
        raise StbenchError(f"--steps {steps} must be a positive integer")
    w = study.get_workload(workload)
    sets = list(sets or [])
    if offload:
        if "relations" not in w.all_params:
            raise StbenchError(f"--offload needs a workload with a 'relations' parameter; {workload} has none")
        sets.append("relations=offload")
    base, axes, _ = study.resolve_params(w, preset or w.default_preset, smoke, sets)
    warmup = axes.get("warmup_steps", (base["warmup_steps"],))[0]
    sets += [f"max_steps={warmup + steps}", "max_eval_batches=2"]
    return study.plan_new(workload, devices=devices, strategies=None, nprocs=None, batch_sizes=batch_sizes,
                          epochs=[1], sets=sets, repeat=1, preset=preset, smoke=smoke, seed=seed, out=out,
                          env=envinfo.collect())


def profile_report(plan: study.Plan) -> str:
    """The report's Markdown, also written to the folder as profile.md."""
    from .profile_report import report

    text = report(plan.folder, results.read_runs(plan.folder))
    (plan.folder / "profile.md").write_text(text)
    return text


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


def execute(plan: study.Plan, timeout: float | None, progress: Callable, warn: Callable[[str], None],
            profile: bool = False) -> list[dict]:
    """Write the manifest (new studies), run every missing cell, return all rows of the folder.
    With profile, each cell records a torch.profiler trace into the folder's profile/."""
    env = envinfo.collect()
    reasons = {c: cell_skip(c, env, plan.workload) for c in plan.cells}
    for reason in sorted({r for r in reasons.values() if r}):
        warn(f"skipping cells: {reason}")
    devices = sorted({c.device for c, r in reasons.items() if not r})
    peaks = envinfo.peaks(env, devices)
    if not (plan.folder / "manifest.json").exists():
        results.write_manifest(plan.folder, {**plan.manifest, "peaks": peaks, "timeout_s": timeout})
    done = len(results.done_ids(plan.folder) & {c.run_id for c in plan.cells})
    with progress(len(plan.cells), done) as (on_start, on_done):
        extra = ("--profile", str((plan.folder / "profile").resolve())) if profile else ()
        run_matrix(list(plan.cells), plan.folder, env, plan.workload, timeout=timeout, peaks=peaks,
                   on_start=on_start, on_done=on_done, extra_args=extra)
    return results.read_runs(plan.folder)
