"""The CPU levers a cell's process sets on itself before torch starts its thread pools (issue
32): its intra-op threads (the parent's choice from the environment, or its own where no parent
checked the load), inter-op threads, core binding; and which host allocator it runs with."""

from __future__ import annotations

import os
from pathlib import Path

from ..contract import TrainerParams
from ..plan.threads import THREADS_ENV, ThreadChoice, choose
from ..store import host


def thread_choice(knobs: TrainerParams, local_ranks: int, environ=os.environ) -> ThreadChoice:
    """The parent's choice when it made one, else physical cores per rank."""
    parent = ThreadChoice.from_env(environ)
    if not knobs.threads and parent is not None:
        return parent
    return choose(knobs.threads, host.physical_cores(), None, local_ranks)


def bind_cores(threads: int, local_rank: int) -> str:
    """Pin this process to one logical CPU of each of `threads` physical cores, rank after rank
    (ranks never share a core); the CPUs as text for the row."""
    cpus = host.first_core_cpus(threads * (local_rank + 1))[threads * local_rank :]
    cpus = cpus or host.first_core_cpus(threads)  # more ranks than cores: they share
    os.sched_setaffinity(0, cpus)
    return ",".join(map(str, cpus))


def apply(knobs: TrainerParams, environ=os.environ) -> dict:
    """Set threads, inter-op threads and binding; the row's figures of what was set."""
    import torch

    choice = thread_choice(knobs, int(environ.get("LOCAL_WORLD_SIZE", 1)), environ)
    threads = choice.threads
    # the parent prepared every rank of a local cell on this machine (emulated nodes too): its
    # global rank numbers the cores; elsewhere the node's own ranks share the node
    slot = int(environ.get("RANK" if THREADS_ENV in environ else "LOCAL_RANK", 0))
    bound = bind_cores(threads, slot) if knobs.bind == "cores" else None
    if knobs.bind == "numa":
        bound = ",".join(map(str, sorted(os.sched_getaffinity(0))))  # numactl's node, as started
    torch.set_num_threads(threads)
    if knobs.interop_threads:
        torch.set_num_interop_threads(knobs.interop_threads)  # before any inter-op work
    return {
        **choice.row(),
        "bound_cpus": bound,
        "interop_threads": torch.get_num_interop_threads(),
    }


def loaded_allocator(maps: str | None = None) -> str | None:
    """jemalloc or tcmalloc where one is mapped into this process (preloaded), else None."""
    try:
        maps = Path("/proc/self/maps").read_text() if maps is None else maps
    except OSError:
        return None
    return next((name for name in host.LIBRARIES if f"lib{name}" in maps), None)


def allocator_ran(asked: str, kept: str | None, maps: str | None = None) -> tuple[str, str | None]:
    """(what the host allocator was, why it differs from what was asked or None). `kept`: why
    glibc's thresholds could not be fixed (allocator=keep), None where they were."""
    loaded = loaded_allocator(maps)
    if loaded:
        return loaded, None if asked == loaded else f"{loaded} was preloaded (LD_PRELOAD)"
    if asked in host.LIBRARIES:
        return "glibc", f"allocator={asked} was not preloaded (the launcher sets LD_PRELOAD)"
    if asked == "keep":
        return ("glibc" if kept else "glibc, thresholds fixed"), kept
    return "glibc", None
