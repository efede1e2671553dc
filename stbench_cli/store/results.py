"""Reading result folders for reports: the series beside runs.csv, what makes folders one study
and the command that asked its question."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePath

from .files import read_csv


def read_series(folder: Path, name: str) -> list[dict]:
    """The rows of folder/epochs.csv or system.csv ([] where the file is absent)."""
    path = folder / name
    return read_csv(path, ["run_id"]) if path.exists() else []


def study_info(folder: Path, rows: list[dict]) -> dict:
    """One line about a result folder: its name, workload, rows and the command that made it
    (as `_question` has it: no program path, no --out, paths by file name)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        manifest = {}
    command = manifest.get("command") or []
    return {"folder": folder.name, "workload": manifest.get("workload", rows[0]["workload"] if rows else ""),
            "rows": len(rows), "command": _question(command) if command else ""}


# The matrix fields that make two folders one study; the devices are left out: folders of one
# study from different machines merge, and the machines become columns.
_STUDY_FIELDS = ("workload", "strategies", "nprocs", "nnodes", "batch_sizes", "epochs",
                 "base_params", "axes", "repeats", "seed", "preset", "seed_per_repeat")


def _question(command: list) -> str:
    """The command that asked the study's question, as a user types it: `stbench` for the
    installed program's path, --out (where it was written) left out, and every other path by
    its file name (a machine's folders are not part of what ran)."""
    words = ["stbench", *map(str, command[1:])]
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w == "--out":
            skip = True
        elif not w.startswith("--out="):
            out.append(_portable(w))
    return " ".join(out)


def _portable(word: str) -> str:
    """A word of a command with each path in it by its file name: `data=/a/b/x.nc` -> `data=x.nc`,
    `/a/b/x.nc,/c/y.nc` -> `x.nc,y.nc`; a word without a slash stays as it is."""
    key, sep, value = word.partition("=") if not word.startswith("/") else ("", "", word)
    if "/" not in value and "\\" not in value:
        return word
    names = [PurePath(v.replace("\\", "/")).name if ("/" in v or "\\" in v) else v for v in value.split(",")]
    return f"{key}{sep}{','.join(names)}"


def study_of(folder: Path) -> dict:
    """{"key": what makes folders one study, "question": its command}; a folder without a
    readable manifest (a copied runs.csv) is a study of its own, named by its folder."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        matrix = {k: manifest["matrix"].get(k) for k in _STUDY_FIELDS}
        matrix["workload"] = manifest["workload"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {"key": f"folder {folder.name}", "question": folder.name}
    key = hashlib.sha1(json.dumps(matrix, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return {"key": key, "question": _question(manifest.get("command") or []) or folder.name}


def tag(folder: Path) -> dict:
    """What every row read from `folder` carries into a report: its folder, study and question."""
    s = study_of(folder)
    return {"study": str(folder), "study_key": s["key"], "question": s["question"]}
