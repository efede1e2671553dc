"""A study's manifest.json: what was asked for, on which machine, by which stbench.

Its cells are what `--resume` runs and what the rows' run ids hash, so each is kept; but a cell
records only what is its own: its parameters that differ from the matrix's `base_params` (its
workload and preset are the study's). A cnn-strain smoke study of 18 cells wrote every one of
its 27 parameters into every cell, one JSON value a line: 27 KB. `cells(manifest)` gives each
cell whole, as RunSpec.from_dict takes it, from a manifest written either way (an older one's
cells hold all their parameters, which the base then changes in nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import StbenchError
from .files import atomic_write

WIDTH = 160  # a list or mapping that fits this many characters is written on one line (a cell)


def own_cell(cell: dict, workload: str, preset: str, base: dict) -> dict:
    """A cell as the manifest keeps it: what is not the study's own (cells(manifest) undoes it)."""
    study = (("workload", workload), ("preset", preset))
    out = {k: v for k, v in cell.items() if (k, v) not in study}
    out["params"] = [[k, v] for k, v in cell.get("params", ()) if k not in base or base[k] != v]
    return out


def cells(manifest: dict) -> list[dict]:
    """Every cell of the study whole: the study's workload, preset and base parameters under
    the cell's own."""
    matrix = manifest.get("matrix") or {}
    base = dict(matrix.get("base_params") or ())
    study = {"workload": manifest["workload"], "preset": matrix.get("preset", "default")}
    return [{**study, **c, "params": sorted({**base, **dict(c.get("params") or ())}.items())}
            for c in manifest["cells"]]


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
