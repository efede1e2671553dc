"""A study's manifest.json: what was asked for, on which machine, by which stbench.

Each cell is kept whole (its id and every parameter: what `--resume` runs and the rows carry);
the file is written compactly, a list or mapping on one line where it fits, so a smoke study of
18 cells is a few KB rather than one JSON value a line (27 KB before).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import StbenchError
from .files import atomic_write, check_schema

# A manifest's question record (the questions' engine's): its kind says whose it is
GPU_VS_CPU_KIND = "gpu-vs-cpu"  # `stbench gpu-vs-cpu`: the sizes, the CPU's and the GPU's sides
LEVER_KIND = "lever"  # a windowed step of `stbench tune`: each value against the step's reference
RUN_KIND = "run"  # `stbench run --budget` in windows: every cell against the first
CONCLUDED = "every size concluded"  # a question's `stopped` where the engine left no pair open
WIDTH = 160  # a list or mapping that fits this many characters is written on one line (a cell)


def dumps(value, indent: int = 0) -> str:
    """JSON, a value to a line where it fits in WIDTH, indented by one where it does not."""
    flat = json.dumps(value, default=str)
    if len(flat) + indent <= WIDTH or not isinstance(value, (dict, list, tuple)) or not value:
        return flat
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{pad}{dumps(v, indent + 1)}" for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def write_manifest(folder: Path, manifest: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "manifest.json", dumps(manifest) + "\n")


def read_manifest(folder: Path) -> dict:
    """The manifest of a folder of this stbench's schema (another: one line, check_schema)."""
    manifest = load_manifest(folder)
    check_schema(folder, manifest.get("schema", 1))  # a manifest without one is schema 1
    return manifest


def load_manifest(folder: Path) -> dict:
    """The manifest as stored, of any schema (read_manifest checks it)."""
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise StbenchError(f"{folder} has no manifest.json: not a stbench result folder") from None
    except (OSError, ValueError) as exc:
        raise StbenchError(
            f"{path} is corrupt ({exc}); it must be the JSON stbench wrote"
        ) from None
    if not isinstance(manifest, dict) or "cells" not in manifest or "workload" not in manifest:
        raise StbenchError(f"{path} is corrupt: it lacks the 'workload' and 'cells' of the matrix")
    return manifest
