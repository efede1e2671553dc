"""What the parent prepares on this machine before a cell's processes start: the
machine's load over a short window, the thread count that follows from it (plan/threads.py),
the allocator library to preload and the numactl prefix of `bind=numa`. The child reads its
thread count and the reason from the environment (`THREADS_ENV`), so the row says both.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

from ..plan.spec import RunSpec
from ..plan.threads import choose
from ..store import host
from ..store.conditions import others_cores

CHECK_S = 0.3  # the window the load is measured over before each cell (60 ticks of 2 cores)


@dataclass(frozen=True)
class Prepared:
    """A cell's additions: environment, a command prefix, and what the load check saw."""

    env: dict = field(default_factory=dict)
    prefix: tuple[str, ...] = ()
    others_cores: float | None = None  # other processes' CPU use before the cell, in cores
    failure: str | None = None  # a lever asked for that this machine lacks: the cell cannot run


def measure_others(window_s: float = CHECK_S) -> float:
    """Other processes' CPU use in cores over the next `window_s` seconds (this one sleeps)."""
    me = psutil.Process()
    own0, t0 = sum(me.cpu_times()[:2]), psutil.cpu_times()
    start = time.monotonic()
    time.sleep(window_s)
    own1, t1 = sum(me.cpu_times()[:2]), psutil.cpu_times()
    return others_cores(t0, t1, own0, own1, time.monotonic() - start)


def prepare_host(spec: RunSpec, window_s: float = CHECK_S) -> Prepared:
    """The load check, the threads and the allocator and binding levers of one local cell."""
    params = spec.param_dict
    others = measure_others(window_s)
    choice = choose(
        int(params.get("threads", 0)), host.physical_cores(), others, spec.world_size, window_s
    )
    env = choice.env()
    allocator = params.get("allocator", "keep")
    if allocator in host.LIBRARIES:
        library = host.allocator_library(allocator)
        if library is None:
            return Prepared(
                failure=f"allocator={allocator}: no {allocator} library found "
                f"(looked for {', '.join(host.LIBRARIES[allocator])})"
            )
        env["LD_PRELOAD"] = " ".join(filter(None, [library, os.environ.get("LD_PRELOAD")]))
    prefix: tuple[str, ...] = ()
    if params.get("bind") == "numa":
        tool = host.numactl()
        if tool is None:
            return Prepared(failure=f"bind=numa: {host.binding()['numa']}")
        prefix = (tool, "--cpunodebind=0", "--membind=0")
    return Prepared(env, prefix, others)
