"""A gpu-vs-cpu study's predictions (plan/predict.py): what its step is made of, measured once on
this CPU in a process of its own (child/anatomy.py, its configuration at the CPU's defaults,
kept as anatomy.json), then each size's step as the study's CPU rows measured it, predicted
on each GPU asked, into predicted.csv beside runs.csv: a file of its own, never rows."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..contract import BATCH, Workload
from ..plan import registry
from ..plan.predict import Anatomy, Gpu, Step, anatomy_memory_mb, predict, table_name
from ..store.files import ANATOMY, PREDICTED, atomic_write, read_runs, write_lines
from ..store.manifest import read_manifest
from ..store.rows import PredictedLine
from . import warm

ANATOMY_TIMEOUT_S = 120.0
SMALL_BATCHES = (2, 8)  # the anatomy's batches: a step's launches do not grow with the batch


def kept_anatomy(folder: Path) -> Anatomy | None:
    """The study's anatomy.json as measured before its windows; None where there is none."""
    try:
        return _anatomy_of(json.loads((folder / ANATOMY).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def anatomy(folder: Path, manifest: dict, left_s: float = math.inf) -> Anatomy | None:
    """The study's anatomy: kept, else measured now (before the question's windows: its budget
    pays for it and no window shares the CPU with it) within a third of `left_s`, the seconds
    left of the budget (the windows are the question; the predictions an addition to its
    answer), and at most ANATOMY_TIMEOUT_S; None where it cannot be."""
    found = kept_anatomy(folder)
    if found is not None:
        return found
    first = next(
        c for c in manifest["cells"] if c["repeat"] == 0 and str(c["device"]).startswith("cpu")
    )
    params = dict(first["params"])  # the manifest keeps a cell's parameters as pairs
    with tempfile.TemporaryDirectory() as work:
        job, out = Path(work) / "job.json", Path(work) / "anatomy.json"
        job.write_text(
            json.dumps({"workload": first["workload"], "params": params, "batches": SMALL_BATCHES})
        )
        try:
            # forked from the warm server where there is one: torch is imported already
            done = warm.run_module(
                [sys.executable, "-m", "stbench.child.anatomy", str(job), str(out)],
                timeout=max(min(ANATOMY_TIMEOUT_S, left_s / 3), 1.0),
            )
        except subprocess.TimeoutExpired:
            return None
        if done.returncode != 0 or not out.exists():
            return None
        atomic_write(folder / ANATOMY, out.read_text())
    return kept_anatomy(folder)


def _anatomy_of(stored: dict) -> Anatomy:
    """An Anatomy as anatomy.json keeps it (its tuples as JSON's lists)."""
    lines = tuple(tuple(line) for line in stored.get("peak_lines") or ())
    return Anatomy(**{**stored, "batches": tuple(stored["batches"]), "peak_lines": lines})


def steps(folder: Path, manifest: dict, found: Anatomy) -> list[Step]:
    """Each measured size's step: its FLOPs and data loading from the CPU's rows at that size,
    its launches and bytes from the anatomy, its memory from the workload's prediction."""
    asked = manifest["question"]["size"]
    defaults = manifest["question"].get("defaults") or {}
    w = registry.get(manifest["workload"])
    rows = [r for r in read_runs(folder) if r.status == "ok" and r.device == "cpu"]
    cells = {c["run_id"]: c for c in manifest["cells"]}
    out = []
    for size in asked["values"]:
        here = [r for r in rows if _size(r, asked["param"]) == size]
        if not here:
            continue
        # the loading in the step's own thread: batches cut on the host, and no loader workers
        # in the configuration the GPU runs (the defaults': gpu-vs-cpu's GPU keeps them)
        serial = (
            [r for r in here if not r.params.get("workers")]
            if found.data_on_host and not defaults.get("workers")
            else []
        )
        params = dict(cells[here[0].run_id]["params"]) if here[0].run_id in cells else {}
        out.append(rows_step(size, here, serial, found, w, params or dict(here[0].params)))
    return out


def rows_step(
    size: str, here: Sequence, serial: Sequence, found: Anatomy, w: Workload, params: dict
) -> Step:
    """A size's step from the rows measured at it (one batch): its FLOPs, its data loading (of
    which `serial`'s in the step's own thread) and the bytes it streams from host memory from the
    rows, its launches and bytes from the anatomy, its memory from the workload's prediction,
    the fastest configuration's step as the rows' best."""
    batch = here[0].batch_size
    flops = statistics.median(r.flops_per_sample or 0.0 for r in here) * batch
    by_config: dict[str, list[float]] = {}
    for r in here:
        by_config.setdefault(json.dumps(r.params, sort_keys=True, default=str), []).append(
            r.samples_per_s or 0.0
        )
    fastest = max(statistics.median(v) for v in by_config.values())
    return Step(
        size,
        batch,
        flops,
        found.launches,
        found.state_bytes,
        found.saved_bytes(batch),
        found.batch_bytes(batch),
        found.host_step_s,
        data_s=_per_step(here, "data_s"),
        serial_data_s=_per_step(serial, "data_s"),
        least_serial_data_s=_per_step(serial, "data_s", min),
        streamed_bytes=_per_step(here, "x.stream_mb") * 2**20,  # stnn's offloaded relation rows
        predicted_mb=memory_mb(w, params, batch, found),
        cpu_step_s=batch / fastest if fastest > 0 else None,
        operators=found.operators,
    )


def _per_step(rows, column: str, of=statistics.median) -> float:
    """The median (or `of`) of a column a step over the rows that have it (0 where none does)."""
    found = [r[column] / r.steps_done for r in rows if r[column] is not None and r.steps_done]
    return of(found) if found else 0.0


def _size(row, param: str) -> str:
    return str(row.batch_size if param == BATCH else row.params.get(param))


def memory_mb(w: Workload, params: dict, batch: int, found: Anatomy) -> float | None:
    """A GPU step's memory, MiB: the workload's own prediction where it has one, else the
    step's anatomy's (None: neither)."""
    predicted = None
    if w.predict:
        try:
            predicted = w.predict(params, batch, "cuda", capability=None)
        except (KeyError, ValueError, TypeError):
            predicted = None
    if predicted:
        return predicted["device_bytes"] / 2**20
    return anatomy_memory_mb(found, batch)


def on_this_host(cards: Sequence[Gpu], here: Sequence[Mapping], device: str) -> list[Gpu]:
    """The cards, the one this machine has (`here`: its GPUs) marked measured here (its host's
    time and loading are this machine's, as measured: predict.loading_s) and with eager
    PyTorch's least host cost of an operator measured on this host (the doctor's launches check
    on `device`: what the bound charges each operator, gpus.toml's eager_op_us until measured);
    the table's figure stays for the others, and where the check cannot run."""
    known = {c.name: c for c in cards}
    names = {table_name(str(g.get("name", "")), known) for g in here} & set(known)
    if not device or not names:
        return list(cards)
    from .doctor import child_check

    mark: dict = {"measured_here": True}
    try:
        found = child_check("launches", device)
    except (RuntimeError, ValueError):  # a failed child, or no JSON from it
        found = {}
    us = found.get("eager_op_us")
    if us:
        mark |= {
            "eager_op_us": us,
            "eager_source": f"measured on this host by stbench's launches check on {device}: "
            f"{found.get('ops', 0):,} in-place adds on one element, {us:.1f} us each",
        }
    return [replace(c, **mark) if c.name in names else c for c in cards]


def write_predictions(folder: Path, gpus: Sequence[Gpu]) -> list[PredictedLine]:
    """predicted.csv for the study in `folder` on each of `gpus` (its lines; none where the
    anatomy could not be measured)."""
    manifest = read_manifest(folder)  # once: the anatomy's configuration and the sizes
    found = kept_anatomy(folder)  # measured before the windows, or not at all
    if found is None:
        return []
    lines = []
    for step in steps(folder, manifest, found):
        for gpu in gpus:
            p = predict(step, gpu)
            ms = {k: v * 1e3 for k, v in p.terms.items()}
            lines.append(
                PredictedLine(
                    gpu=gpu.name,
                    variant=gpu.variant,
                    size=step.size,
                    batch=step.batch,
                    gflop=step.flops / 1e9,
                    launches=step.launches,
                    bound_ms=p.bound_s * 1e3,
                    bound_by=p.bound_by,
                    lever=p.lever,
                    estimate_ms=p.estimate_s * 1e3,
                    fits=p.fits,
                    memory_mb=step.predicted_mb,
                    cpu_step_ms=(step.cpu_step_s or 0.0) * 1e3,
                    most_gain=p.most_gain,
                    estimated_gain=p.estimated_gain,
                    flops_ms=ms["FLOPs"],
                    bandwidth_ms=ms["memory bandwidth"],
                    host_link_ms=ms["the host link"],
                    launches_ms=ms["launches"],
                    host_ms=ms["the host"],
                    launch_floor_us=gpu.launch_floor_us,
                    eager_op_us=gpu.eager_op_us,
                    measured_here=gpu.measured_here,
                )
            )
    if lines:
        write_lines(folder / PREDICTED, lines)
    return lines
