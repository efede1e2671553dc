"""Run a planned study into its result folder, resumably.

A cell is done when its row is in runs.csv; `execute` skips those, so running it again on the
same folder (after Ctrl-C, a crash or SIGKILL of this process) completes the matrix with
exactly one row per cell x repeat. The parent alone writes the result files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

from ..plan.planner import Plan
from ..plan.spec import RunSpec
from ..store.files import prune_orphans, write_cell
from ..store.machine import EnvInfo, fingerprint, gpu_names
from ..store.manifest import read_manifest, write_manifest
from ..store.rows import Derived, Identity, Machine, RunRow, SystemRow
from . import envinfo
from .launch import Outcome, gpu_indices, run_cell


def identity(spec: RunSpec) -> Identity:
    return Identity(
        run_id=spec.run_id, workload=spec.workload, device=spec.device, strategy=spec.strategy,
        world_size=spec.world_size, nodes=1, batch_size=spec.batch_size,
        global_batch_size=spec.batch_size * spec.world_size, epochs=spec.epochs, repeat=spec.repeat,
        seed=spec.seed, preset=spec.preset, params=json.dumps(spec.param_dict, sort_keys=True),
    )


def machine(env: EnvInfo) -> Machine:
    gpus = gpu_names(env.gpus)
    return Machine(host=env.host, cpu_model=env.cpu_model, gpu_count=env.gpu_count, torch=env.torch,
                   cuda=env.cuda, nccl=env.nccl, cores=env.cores_logical, gpu_names=gpus,
                   machine_id=fingerprint(env.host, env.cpu_model, env.cores_logical, gpus, env.gpu_count, env.torch))


def derived(spec: RunSpec, outcome: Outcome, peaks: dict[str, dict]) -> Derived:
    figures = outcome.result.figures
    setup = max(outcome.cell_s - figures.wall_s, 0.0) if figures.wall_s is not None else None
    peak_gflops = fraction = None
    peak = peaks.get(spec.device)
    if peak and figures.achieved_gflops is not None:
        # A ddp world on N GPUs has N devices' peak; on CPU the ranks share one machine.
        devices = spec.world_size if spec.device.startswith("cuda") else 1
        peak_gflops = peak["matmul_gflops"] * devices
        fraction = figures.achieved_gflops / peak_gflops
    return Derived(setup_s=setup, peak_gflops=peak_gflops, peak_fraction=fraction, **outcome.energy)


def make_row(spec: RunSpec, env: EnvInfo, outcome: Outcome, peaks: dict[str, dict]) -> RunRow:
    r = outcome.result
    return RunRow(identity(spec), r.status, r.reason, machine(env), r.figures, derived(spec, outcome, peaks), r.extras)


def _run_one(spec: RunSpec, folder: Path, env: EnvInfo, timeout, peaks, interval, extra) -> tuple:
    work = folder / ".cells" / spec.run_id
    outcome = run_cell(spec, work, folder / "logs" / f"{spec.run_id}.log", timeout, interval, extra,
                       tuple(env.gpu_uuids(gpu_indices(spec))))
    shutil.rmtree(work, ignore_errors=True)
    system = [SystemRow(run_id=spec.run_id, **s) for s in outcome.system]
    return make_row(spec, env, outcome, peaks), list(outcome.result.epochs), system, outcome.unavailable


def _note_unavailable(folder: Path, manifest: dict, fields: frozenset) -> None:
    """Name in the manifest the sampled fields this machine could not give (MIG, containers)."""
    known = set(manifest.get("unavailable_fields", []))
    if not fields <= known:
        manifest["unavailable_fields"] = sorted(known | fields)
        write_manifest(folder, manifest)


def execute(plan: Plan, env: EnvInfo, timeout: float | None = None, *, interval: float = 1.0,
            extra_args: tuple[str, ...] = (),
            on_start: Callable[[RunSpec], None] = lambda spec: None,
            on_done: Callable[[RunSpec, dict], None] = lambda spec, row: None) -> list[dict]:
    """Write the manifest (a new study), run every cell not yet done; returns every row of
    the study (done before and now) in cell order. extra_args go to each cell's process
    (`--profile DIR`)."""
    folder = plan.folder
    devices = sorted({c.device for c in plan.cells if c.run_id not in plan.skips})
    peaks = envinfo.peaks(env, devices)
    manifest = read_manifest(folder) if (folder / "manifest.json").exists() else None
    if manifest is None:
        manifest = {**plan.manifest, "peaks": peaks, "timeout_s": timeout}
        write_manifest(folder, manifest)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    rows = {r["run_id"]: r for r in plan.done}
    prune_orphans(folder, set(rows))
    for spec in plan.cells:
        if spec.run_id in rows:
            continue
        on_start(spec)
        if spec.run_id in plan.skips:
            row, epochs, system = RunRow(identity(spec), "skipped", plan.skips[spec.run_id], machine(env)), [], []
        else:
            row, epochs, system, unavailable = _run_one(spec, folder, env, timeout, peaks, interval, extra_args)
            _note_unavailable(folder, manifest, unavailable)
        write_cell(folder, row, epochs, system)
        rows[spec.run_id] = row.record()
        on_done(spec, rows[spec.run_id])
    shutil.rmtree(folder / ".cells", ignore_errors=True)
    return [rows[c.run_id] for c in plan.cells if c.run_id in rows]


def prepare_data(workload, out: Path | None, **options) -> Path:
    """Cache a selection of a workload's data as a local store; ValueError on failure."""
    if workload.prepare is None:
        raise ValueError(f"{workload.name} has no data to prepare")
    if out is None:
        name = f"{workload.name}-{options['start']}-{options['end']}".replace(":", "")
        out = envinfo.cache_dir() / "data" / f"{name}.zarr"
    out.parent.mkdir(parents=True, exist_ok=True)
    return workload.prepare(out=out, **options)
