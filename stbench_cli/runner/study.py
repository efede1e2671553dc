"""Run a planned study into its result folder, resumably.

A cell is done when its row is in runs.csv; `run_study` skips those, so running it again on the
same folder (after Ctrl-C, a crash or SIGKILL of this process) completes the matrix with
exactly one row per cell x repeat. A cell whose row says it `failed` or `hung` (a lost node, a
crashed rank, a stall: RETRIED) is run again, and its new row replaces the old one. The parent
alone writes the result files.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ..device import parse
from ..errors import StbenchError
from ..plan import registry
from ..plan.launcher_config import ELSEWHERE
from ..plan.planner import Plan
from ..plan.spec import RunSpec
from ..store.conditions import conditions
from ..store.files import prune_orphans, write_cell, write_ranks
from ..store.jobs import forget_job
from ..store.machine import EnvInfo, fingerprint, gpu_names
from ..store.manifest import read_manifest, write_manifest
from ..store.rows import Derived, Identity, Machine, Run, RunRow, SystemRow, run_of
from . import envinfo, launchers
from .lock import FolderLock
from .peak_math import math_ran, peak_key
from .processes import CellJob, Outcome, gpu_indices


def identity(spec: RunSpec, launcher: str = "local") -> Identity:
    return Identity(
        run_id=spec.run_id,
        workload=spec.workload,
        device=spec.device,
        strategy=spec.strategy,
        world_size=spec.world_size,
        nodes=spec.nodes,
        batch_size=spec.batch_size,
        global_batch_size=spec.batch_size * spec.world_size,
        epochs=spec.epochs,
        repeat=spec.repeat,
        seed=spec.seed,
        preset=spec.preset,
        params=json.dumps(spec.param_dict, sort_keys=True),
        nproc_per_node=spec.nproc_per_node,
        launcher=launcher,
        backend=spec.backend,
    )


def machine(env: EnvInfo) -> Machine:
    gpus = gpu_names(env.gpus)
    return Machine(
        host=env.host,
        cpu_model=env.cpu_model,
        gpu_count=env.gpu_count,
        torch=env.torch,
        cuda=env.cuda,
        nccl=env.nccl,
        cores=env.cores_logical,
        gpu_names=gpus,
        machine_id=fingerprint(
            env.host, env.cpu_model, env.cores_logical, gpus, env.gpu_count, env.torch
        ),
    )


def devices_used(spec: RunSpec, gpu_count: int) -> int:
    """How many distinct devices a cell's ranks run on (device.resolve's rule, per node): the
    plan's count, for cells whose ranks reported no GPU (`gpus_used`)."""
    d = parse(spec.device)
    if not d.is_cuda or d.index is not None:
        return spec.nodes if d.is_cuda else 1
    return spec.nodes * min(spec.nproc_per_node, gpu_count or spec.nproc_per_node)


def derived(spec: RunSpec, outcome: Outcome, peaks: dict[str, dict], gpu_count: int = 1) -> Derived:
    figures = outcome.result.figures
    setup = max(outcome.cell_s - figures.wall_s, 0.0) if figures.wall_s is not None else None
    peak_gflops = fraction = None
    peak = peaks.get(spec.device) or {}
    # the peak of the math the cell's FLOPs ran at (peak_math.py)
    math = math_ran(
        spec.param_dict["precision"],
        figures.matmul_math,
        figures.conv_math,
        _flops_in(spec.workload),
    )
    at, math = peak_key(math, peak)
    if peak.get(at) and figures.achieved_gflops is not None:
        # A world has the peak of the distinct devices it runs on: the GPUs its ranks reported
        # (by UUID: emulated nodes' gloo ranks may share one), else the plan's count (GPUs
        # that named no UUID); one machine for CPU ranks.
        peak_gflops = peak[at] * (figures.gpus_used or devices_used(spec, gpu_count))
        fraction = figures.achieved_gflops / peak_gflops
    return Derived(
        setup_s=setup,
        peak_gflops=peak_gflops,
        peak_fraction=fraction,
        job_id=outcome.job_id,
        peak_math=math if fraction is not None else None,
        **{**UNMEASURED, **outcome.energy},
    )


# a launcher whose parent does not sample the cell's node (Slurm) measures no energy
UNMEASURED = {
    f"{d}_energy_method": "none: not sampled (the launcher's parent is not on the cell's node)"
    for d in ("gpu", "cpu")
}


def _flops_in(workload: str) -> str:
    """The library that runs most of a workload's FLOPs (its Workload.flops_in)."""
    try:
        return registry.get(workload).flops_in
    except StbenchError:  # a row of a workload no longer installed
        return "matmul"


def busy_threads(threads: int | None, ranks: int, gpu: bool, workers: int) -> int | None:
    """The cell's threads that other processes' use on its machine contends with: every
    intra-op thread of a CPU cell; of a GPU cell, the host thread of each rank that launches its
    kernels and its loader workers (its intra-op threads idle while the GPU computes). Counted
    as a CPU cell, every cuda cell of the first H100 run was marked contended: 16 threads on 16
    cores, beside 0.2-0.7 cores of other use (the parent's NVML and psutil sampling among it)."""
    if not threads:
        return None
    return ranks * (1 + int(workers or 0)) if gpu else threads * ranks


def make_row(
    spec: RunSpec, env: EnvInfo, outcome: Outcome, peaks: dict[str, dict], launcher: str = "local"
) -> RunRow:
    r = outcome.result
    # the threads of every rank on this machine: a local cell's whole world, a node's elsewhere
    ranks = spec.world_size if launcher == "local" else spec.nproc_per_node
    gpu = parse(spec.device).is_cuda
    threads = busy_threads(r.figures.threads, ranks, gpu, spec.param_dict.get("workers", 0))
    state = conditions(outcome.system, env.cores_logical, threads, outcome.others_before, gpu)
    return RunRow(
        identity(spec, launcher),
        r.status,
        r.reason,
        machine(env),
        r.figures,
        derived(spec, outcome, peaks, env.gpu_count),
        r.extras,
        state,
    )


def _run_one(cell: CellJob, env: EnvInfo, peaks) -> tuple:
    spec, launcher = cell.spec, cell.launch.kind
    outcome = launchers.get(launcher).run_cell(cell)
    system = [SystemRow(run_id=spec.run_id, **s) for s in outcome.system]
    return (
        make_row(spec, env, outcome, peaks, launcher),
        list(outcome.result.epochs),
        system,
        outcome,
    )


def _note_unavailable(
    folder: Path, manifest: dict, fields: frozenset, notes: dict[str, str]
) -> None:
    """Name in the manifest the sampled fields this machine could not give (MIG, containers)
    and the measurements a cell could not make (a profiler that did not start), with why."""
    known = set(manifest.get("unavailable_fields", []))
    said = manifest.get("unavailable", {})
    if not fields <= known or any(said.get(k) != v for k, v in notes.items()):
        manifest["unavailable_fields"] = sorted(known | fields)
        manifest["unavailable"] = {**said, **notes}
        write_manifest(folder, manifest)


def run_study(
    plan: Plan,
    env: EnvInfo,
    timeout: float | None = None,
    *,
    interval: float = 1.0,
    stall: float | None = None,
    on_begin: Callable[[], None] = lambda: None,
    on_start: Callable[[RunSpec], None] = lambda spec: None,
    on_done: Callable[[RunSpec, Run], None] = lambda spec, row: None,
) -> list[Run]:
    """Take the folder's lock, write the manifest (a new study), run every cell not yet done;
    returns every row of the study (done before and now) in cell order. stall: --stall-limit
    (None: each cell's own, derived from its progress). A resumed study keeps the --timeout and
    --stall-limit it was started with unless given others. The launcher's checks and the lock
    come first: a user error or a folder that another parent owns is one StbenchError before
    anything is written."""
    launchers.get(plan.launch.kind).check(plan)
    if timeout is None:
        timeout = plan.manifest.get("timeout_s")
    if stall is None:
        stall = plan.manifest.get("stall_limit_s")
    # a Dask cluster is reached (or started) before the lock: one that is not there is a line
    with launchers.opened(plan) as session, FolderLock(plan.folder):
        on_begin()
        job = partial(
            CellJob,
            folder=plan.folder,
            timeout=timeout,
            interval=interval,
            profile=plan.profile,
            launch=plan.launch,
            stall=stall,
            session=session,
        )
        return _run_cells(plan, env, job, on_start, on_done)


def _run_cells(plan: Plan, env: EnvInfo, job: partial, on_start, on_done) -> list[Run]:
    """Every cell without its row, or whose row says it failed or hung (RETRIED): the new row
    replaces the old one. job(spec, gpu_uuids=…): a cell's CellJob, with the study's options."""
    folder = plan.folder
    peaks, manifest = _peaks_and_manifest(plan, env, job)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    before = {r["run_id"] for r in plan.done}
    prune_orphans(folder, before)
    rows = {r["run_id"]: r for r in plan.done if r["run_id"] in plan.finished}
    for spec in plan.cells:
        if spec.run_id in rows:
            continue
        if spec.run_id in before:  # failed or hung: run again (a new Slurm job, not the old one)
            forget_job(folder, spec.run_id)
        on_start(spec)
        if spec.run_id in plan.skips:
            row = RunRow(
                identity(spec, plan.launch.kind), "skipped", plan.skips[spec.run_id], machine(env)
            )
            epochs, system, ranks = [], [], []
        else:
            uuids = tuple(env.gpu_uuids(gpu_indices(spec))) if plan.launch.kind == "local" else ()
            cell = job(spec, gpu_uuids=uuids)
            row, epochs, system, outcome = _run_one(cell, env, peaks)
            _note_unavailable(
                folder, manifest, outcome.unavailable, dict(outcome.result.unavailable)
            )
            ranks = list(outcome.result.ranks)
        write_ranks(folder, ranks, spec.run_id)
        write_cell(folder, row, epochs, system)
        # the scratch folder goes only once the row is written: a Slurm cell's result lives there
        shutil.rmtree(folder / ".cells" / spec.run_id, ignore_errors=True)
        rows[spec.run_id] = run_of(row.record(), str(folder))  # as read_runs reads it back
        on_done(spec, rows[spec.run_id])
    shutil.rmtree(folder / ".cells", ignore_errors=True)
    return [rows[c.run_id] for c in plan.cells if c.run_id in rows]


def _peaks_and_manifest(plan: Plan, env: EnvInfo, job: partial) -> tuple[dict, dict]:
    """This machine's measured peaks for the study's devices, and its manifest: the one in its
    folder (a resumed study), or the plan's with the peaks and limits, written now."""
    folder = plan.folder
    devices = sorted({c.device for c in plan.cells if c.run_id not in plan.skips})
    # Slurm jobs and Dask workers run on other machines than this one (a login node, maybe
    # without a GPU): this machine's peaks would say nothing about them.
    bf16 = tuple(sorted({c.device for c in plan.cells if c.param_dict["precision"] == "bf16"}))
    peaks = envinfo.peaks(env, devices, bf16=bf16) if plan.launch.kind not in ELSEWHERE else {}
    if (folder / "manifest.json").exists():
        return peaks, read_manifest(folder)
    lost = {f"peak {d}": p["unavailable"] for d, p in peaks.items() if "unavailable" in p}
    limits = {"timeout_s": job.keywords["timeout"], "stall_limit_s": job.keywords["stall"]}
    manifest = {
        **plan.manifest,
        "peaks": peaks,
        **limits,
        **({"unavailable": lost} if lost else {}),
    }
    write_manifest(folder, manifest)
    return peaks, manifest


def prepare_data(workload, out: Path | None, **options) -> Path:
    """Cache a selection of a workload's data as a local store; ValueError on failure."""
    if workload.prepare is None:
        raise ValueError(f"{workload.name} has no data to prepare")
    if out is None:
        name = f"{workload.name}-{options['start']}-{options['end']}".replace(":", "")
        out = envinfo.cache_dir() / "data" / f"{name}.zarr"
    out.parent.mkdir(parents=True, exist_ok=True)
    return workload.prepare(out=out, **options)
