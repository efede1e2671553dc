"""Generated data a workload keeps between processes: arrays saved under the engine's cache
folder (`BuildContext.cache_dir`: STBENCH_CACHE, else ~/.cache/stbench), made once and read back
by the next process that asks for the same name (a study's cells and windows, its anatomy).

A workload names a set by everything that makes it (its parameters, its seed, and a version of
its generator where the generator may change); stbench keeps a workload's KEEP most recently used
sets and removes the older ones, so that the rounds of a study with a seed per round do not fill
a disk."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

CACHE_LIMIT = 512 * 2**20  # larger sets are made each time: a cache of GBs costs more
KEEP = 8  # a workload's sets kept, the most recently used


def kept_arrays(cache_dir, workload: str, key: str, nbytes: int, make: Callable[[], dict]) -> dict:
    """`make()`'s arrays (name -> array), read from `cache_dir` where a process kept them under
    `workload` and `key`, else made and kept; a set of more than CACHE_LIMIT bytes is made each
    time."""
    import numpy as np

    if nbytes > CACHE_LIMIT:
        return make()
    folder = Path(cache_dir) / "data"
    path = folder / f"{workload}-{key}.npz"
    try:
        with np.load(path) as kept:
            found = {name: kept[name] for name in kept.files}
        os.utime(path)  # used now: the last to be removed
        return found
    except (OSError, KeyError, ValueError):
        pass
    arrays = make()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")  # ranks may write at once
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    _forget_older(folder, workload)
    return arrays


def _forget_older(folder: Path, workload: str) -> None:
    """All but the workload's KEEP most recently used sets removed (another process may be
    removing them too)."""
    sets = []
    for path in folder.glob(f"{workload}-*.npz"):
        if path.name.endswith(".tmp.npz"):  # another process's, being written
            continue
        try:
            sets.append((path.stat().st_mtime, path))
        except OSError:
            pass
    for _, path in sorted(sets, reverse=True)[KEEP:]:
        path.unlink(missing_ok=True)
