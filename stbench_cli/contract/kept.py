"""Generated data a workload keeps between processes: arrays saved under the engine's cache
folder (`BuildContext.cache_dir`: STBENCH_CACHE, else ~/.cache/stbench), made once and read back
by the next process that asks for the same name (a study's cells and windows, its anatomy).

A workload names a set by everything that makes it (its parameters, its seed, and a version of
its generator where the generator may change); stbench keeps a workload's most recently used
sets, at most KEEP of them and KEPT_BYTES in all, and removes the older ones, so that the
rounds of a study with a seed per round do not fill a disk.

Why a set of up to a GiB is kept: cnn-strain's default 400,000 curves (0.92 GB) took 10 s to
make on the 2-vCPU VM, in every process of a question (a tune's step paid it in each of its
two processes, 6.7-10.4 s before its first 0.2-s window), and 0.2-0.7 s to read back from the
page cache (its first read after the write, 1.3-4 s)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

CACHE_LIMIT = 2**30  # larger sets are made each time (the paper's 1 M curves: 2.4 GB)
KEEP = 8  # a workload's sets kept, the most recently used ...
KEPT_BYTES = 2 * CACHE_LIMIT  # ... and at most this many bytes of them

_made_s = 0.0  # this process's seconds making sets it kept (`made_s`)


def made_s() -> float:
    """The seconds this process spent making the sets it kept: what a later process asking for
    them does not pay again (a question's engine predicts its next process's start without)."""
    return _made_s


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
    global _made_s
    began = time.perf_counter()
    arrays = make()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")  # ranks may write at once
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    _forget_older(folder, workload)
    _made_s += time.perf_counter() - began  # its writing too
    return arrays


def _forget_older(folder: Path, workload: str) -> None:
    """The workload's sets but its most recently used ones removed: at most KEEP of them and
    KEPT_BYTES in all, the newest always kept (another process may be removing them too)."""
    sets = []
    for path in folder.glob(f"{workload}-*.npz"):
        if path.name.endswith(".tmp.npz"):  # another process's, being written
            continue
        try:
            found = path.stat()
        except OSError:
            continue
        sets.append((found.st_mtime, found.st_size, path))
    total = 0
    for i, (_, size, path) in enumerate(sorted(sets, reverse=True)):
        total += size
        if i >= KEEP or (i and total > KEPT_BYTES):
            path.unlink(missing_ok=True)
