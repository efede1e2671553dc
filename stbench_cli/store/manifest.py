"""A study's manifest.json: what was asked for, on which machine, by which stbench."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import StbenchError
from .files import atomic_write, check_schema


def write_manifest(folder: Path, manifest: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "manifest.json", json.dumps(manifest, indent=1, default=str))


def read_manifest(folder: Path) -> dict:
    """The manifest of a folder of this stbench's schema (another: one line, check_schema)."""
    manifest = load_manifest(folder)
    check_schema(folder, manifest.get("schema", 1))  # a manifest without one is schema 1
    return manifest


def load_manifest(folder: Path) -> dict:
    """The manifest as stored, of any schema (what a migration reads)."""
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
