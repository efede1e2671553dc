"""From what the user typed to a planned study: parameters resolved and checked, the
matrix expanded, a result folder and its manifest. All user mistakes surface here, as
one StbenchError line, before anything is written."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import workloads
from workloads.base import Workload

from . import __version__, results
from .envinfo import EnvInfo
from .errors import StbenchError
from .matrix import cell_skip
from .spec import MatrixSpec, RunSpec, check_device, check_positive, check_strategy, expand, parse_set


@dataclass(frozen=True)
class Plan:
    workload: Workload
    cells: tuple[RunSpec, ...]
    folder: Path
    manifest: dict


def get_workload(name: str) -> Workload:
    try:
        return workloads.get(name)
    except KeyError as exc:
        raise StbenchError(exc.args[0]) from None


def resolve_params(w: Workload, preset: str, smoke: bool, sets: list[str]) -> tuple[dict, dict, dict]:
    """(base params, --set axes, engine defaults such as batch_size/epochs from presets)."""
    layers = [preset] + (["smoke"] if smoke and preset != "smoke" else [])
    for name in layers:
        if name not in w.presets:
            raise StbenchError(f"unknown preset {name!r} for {w.name}; valid: {', '.join(w.presets)}")
    specs = w.all_params
    base = {name: p.default for name, p in specs.items()}
    engine: dict = {}
    for name in layers:
        for key, value in w.presets[name].items():
            (engine if key in ("batch_size", "epochs") else base)[key] = value
    axes = {}
    for key, raw in parse_set(sets):
        if key not in specs:
            raise StbenchError(f"unknown parameter {key!r} for {w.name}; valid: {', '.join(sorted(specs))}")
        try:
            axes[key] = tuple(dict.fromkeys(specs[key].parse(v) for v in raw))
        except ValueError as exc:
            raise StbenchError(f"--set {exc}") from None
    return base, axes, engine


def check_data(w: Workload, cells: list[RunSpec]) -> None:
    """Check the data of every distinct parameter set, so a missing or corrupt file, or a
    selection outside the data, fails now with one line rather than as a failed cell."""
    if w.checker is None:
        return
    for params in dict.fromkeys(c.params for c in cells):
        try:
            w.check(dict(params))
        except ValueError as exc:
            raise StbenchError(str(exc)) from None


def new_folder(out: Path, workload: str) -> Path:
    if out.exists() and not out.is_dir():
        raise StbenchError(f"--out {out} exists and is not a folder")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = out / f"{stamp}-{socket.gethostname()}-{workload}"
    n = 1
    while folder.exists():  # never write into an earlier study's folder
        n += 1
        folder = out / f"{stamp}-{socket.gethostname()}-{workload}-{n}"
    return folder


def git_sha() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def plan_new(workload: str, *, devices, strategies, nprocs, batch_sizes, epochs, sets, repeat: int,
             preset: str | None, smoke: bool, seed: int, out: Path, env: EnvInfo) -> Plan:
    w = get_workload(workload)
    base, axes, engine = resolve_params(w, preset or w.default_preset, smoke, sets or [])
    matrix = MatrixSpec(
        workload=w.name,
        devices=tuple(dict.fromkeys(check_device(d) for d in devices or ["cpu"])),
        strategies=tuple(dict.fromkeys(check_strategy(s) for s in strategies or ["single"])),
        nprocs=check_positive("--nproc", nprocs or [1]),
        batch_sizes=check_positive("--batch-size", batch_sizes or [engine.get("batch_size", 64)]),
        epochs=check_positive("--epochs", epochs or [engine.get("epochs", 1)]),
        base_params=tuple(sorted(base.items())), axes=tuple(axes.items()),
        repeats=check_positive("--repeat", [repeat])[0], seed=seed, preset=preset or w.default_preset,
    )
    cells = expand(matrix)
    reasons = [cell_skip(c, env, w) for c in cells]
    if all(reasons):  # before check_data, which may open a remote store
        raise StbenchError(f"nothing to run: {reasons[0]}")
    check_data(w, cells)
    folder = new_folder(out, w.name)
    manifest = {
        "stbench_version": __version__, "git_sha": git_sha(), "command": sys.argv,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "workload": w.name,
        "matrix": asdict(matrix), "cells": [asdict(c) for c in cells], "env": env.to_dict(),
    }
    return Plan(w, tuple(cells), folder, manifest)


def plan_resume(workload: str, folder: Path) -> Plan:
    """The study stored in folder/manifest.json; its runs.csv must be readable."""
    if not folder.is_dir():
        raise StbenchError(f"--resume {folder}: no such result folder")
    manifest = results.read_manifest(folder)
    if manifest["workload"] != workload:
        raise StbenchError(f"--resume {folder} holds a {manifest['workload']} study, not {workload}")
    results.done_ids(folder)  # a corrupt runs.csv stops us here, untouched
    try:
        cells = tuple(RunSpec.from_dict(c) for c in manifest["cells"])
    except (TypeError, ValueError) as exc:
        raise StbenchError(f"{folder}/manifest.json is corrupt: bad cell ({exc})") from None
    return Plan(get_workload(workload), cells, folder, manifest)
