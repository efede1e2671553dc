"""What reports read of a result folder besides its rows (store.files reads those): the
command that made it as a user types it, and the key of the study it belongs to."""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePath

# The matrix fields that make two folders one study; the devices are left out: folders of one
# study from different machines merge, and the machines become columns.
_STUDY_FIELDS = (
    "workload",
    "strategies",
    "nprocs",
    "nnodes",
    "batch_sizes",
    "epochs",
    "base_params",
    "axes",
    "repeats",
    "seed",
    "preset",
    "seed_per_repeat",
)


def command_text(command: list) -> str:
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
            out.append(_portable_word(w))
    return " ".join(out)


def _portable_word(word: str) -> str:
    """A word of a command with each path in it by its file name: `data=/a/b/x.nc` -> `data=x.nc`,
    `/a/b/x.nc,/c/y.nc` -> `x.nc,y.nc`; a word without a slash stays as it is."""
    key, sep, value = word.partition("=") if not word.startswith("/") else ("", "", word)
    if "/" not in value and "\\" not in value:
        return word
    names = [
        PurePath(v.replace("\\", "/")).name if ("/" in v or "\\" in v) else v
        for v in value.split(",")
    ]
    return f"{key}{sep}{','.join(names)}"


def study_key(manifest: dict) -> str:
    """What makes result folders one study: the matrix they ran, the devices left out (the
    machines become columns)."""
    matrix = {k: manifest["matrix"].get(k) for k in _STUDY_FIELDS}
    matrix["workload"] = manifest["workload"]
    return hashlib.sha1(json.dumps(matrix, sort_keys=True, default=str).encode()).hexdigest()[:12]
