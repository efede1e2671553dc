"""How busy the machine was while a cell ran: its system samples summed up into the
`Conditions` of its runs.csv row. Pure; the parent calls it as it writes the row, and a report
may call it on an older study's system.csv, whose runs.csv rows lack those columns."""

from __future__ import annotations

from statistics import mean

from ..comparison import number
from .rows import Conditions

# NVML's clock slowdown reasons (nvmlClocksThrottleReason*) that slow a run down; idle,
# application clocks, sync boost and display clocks are not load from elsewhere or heat.
SLOWDOWNS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal",
    0x40: "thermal",
    0x80: "power brake",
}
SLOWDOWN_MASK = sum(SLOWDOWNS)
CONTENTION_SLACK = 0.25  # cores of others' use beyond the free ones that still count as quiet
IDLE = ("idle", "iowait")  # every other field of cpu_times is a core busy (steal too: lost to us)


def others_cores(before, after, own_before: float, own_after: float, window_s: float) -> float:
    """Other processes' CPU use in cores over a window, from two psutil.cpu_times() snapshots
    of the machine and the CPU seconds of what is measured at both ends (the load check's own
    process; a window's process and its loader workers). Pure."""
    # guest time is inside user already
    busy = sum(
        getattr(after, f) - getattr(before, f)
        for f in after._fields
        if f not in IDLE and f not in ("guest", "guest_nice")
    )
    return max(busy - (own_after - own_before), 0.0) / window_s if window_s > 0 else 0.0


def slowdown_names(mask: int) -> list[str]:
    return list(dict.fromkeys(name for bit, name in SLOWDOWNS.items() if mask & bit))


def conditions(
    samples: list[dict],
    cores: int | float | None,
    threads: int | None = None,
    before_cores: float | None = None,
    gpu: bool = False,
) -> Conditions:
    """One run's samples (system.csv rows or the sampler's dicts) as its Conditions. The other
    processes' CPU share is the machine's use less the cell's own (proc_cpu_pct counts a core
    as 100%, sys_cpu_pct all cores as 100%). `threads`: the cell's threads on this machine (all
    its ranks'), `before_cores`: the other processes' use in cores the load check saw before
    it started; with them, whether the cell ran contended (`contention`). `gpu`: the threads
    are a GPU cell's busy host threads (runner.study.busy_threads), as its reason says."""

    def values(name: str) -> list[float]:
        return [v for v in (number(s.get(name)) for s in samples) if v is not None]

    loads, steal, masks = (
        values("load_1m"),
        values("cpu_steal_pct"),
        [int(m) for m in values("gpu_throttle")],
    )
    cores = number(cores)
    others = [
        max(number(s.get("sys_cpu_pct")) - number(s.get("proc_cpu_pct")) / cores, 0.0)
        for s in samples
        if cores
        and number(s.get("sys_cpu_pct")) is not None
        and number(s.get("proc_cpu_pct")) is not None
    ]
    slowed = [m & SLOWDOWN_MASK for m in masks]
    seen = 0
    for m in slowed:
        seen |= m
    during = mean(others) if others else None
    before = before_cores / cores * 100 if before_cores is not None and cores else None
    judged = contention(during if during is not None else before, bool(others), cores, threads, gpu)
    return Conditions(
        load_max=max(loads) if loads else None,
        others_cpu_pct=during,
        cpu_steal_pct=mean(steal) if steal else None,
        gpu_throttle=", ".join(slowdown_names(seen)) if masks else None,
        gpu_throttle_share=sum(m != 0 for m in slowed) / len(slowed) if masks else None,
        others_cpu_before_pct=before,
        contended=judged[0],
        contention=judged[1],
    )


def contention(
    others_pct: float | None,
    sampled: bool,
    cores: float | None,
    threads: int | None,
    gpu: bool = False,
    unit: str = "cell",
) -> tuple[bool | None, str | None]:
    """(contended, why): other processes used more of the machine than the cell's threads left
    free, by more than CONTENTION_SLACK of a core (with one core busy beside it, a
    2-thread cell on 2 cores ran 25x slower). `sampled`: the share was sampled while the cell
    (or the `unit`: a window) ran, else it is the check before it. None where a figure is
    missing."""
    if others_pct is None or not cores or not threads:
        return None, None
    used, free = others_pct / 100 * cores, max(cores - threads, 0)
    if used <= free + CONTENTION_SLACK:
        return False, None
    when = (
        f"on average while the {unit} ran"
        if sampled
        else "just before the cell (not sampled after)"
    )
    mine = f"{threads} thread{'s' if threads != 1 else ''}"
    mine = f"{mine} feeding the GPU" if gpu else mine
    return True, (
        f"contended: other processes used {used:.2f} of {cores:g} cores {when}; its {mine} "
        f"left {free:g} free"
    )
