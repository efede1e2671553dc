"""How busy the machine was while a cell ran: its system samples summed up into the
`Conditions` of its runs.csv row. Pure; the parent calls it as it writes the row, and a report
may call it on an older study's system.csv, whose runs.csv rows lack those columns."""

from __future__ import annotations

from statistics import mean

from .rows import Conditions

# NVML's clock slowdown reasons (nvmlClocksThrottleReason*) that slow a run down; idle,
# application clocks, sync boost and display clocks are not load from elsewhere or heat.
SLOWDOWNS = {0x4: "power cap", 0x8: "hardware slowdown", 0x20: "thermal", 0x40: "thermal", 0x80: "power brake"}
SLOWDOWN_MASK = sum(SLOWDOWNS)


def number(value) -> float | None:
    """A sample's value as a float (rows come back from the files as text); None where empty."""
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def slowdown_names(mask: int) -> list[str]:
    return list(dict.fromkeys(name for bit, name in SLOWDOWNS.items() if mask & bit))


def conditions(samples: list[dict], cores: int | float | None) -> Conditions:
    """One run's samples (system.csv rows or the sampler's dicts) as its Conditions. The other
    processes' CPU share is the machine's use less the cell's own (proc_cpu_pct counts a core
    as 100%, sys_cpu_pct all cores as 100%)."""
    def values(name: str) -> list[float]:
        return [v for v in (number(s.get(name)) for s in samples) if v is not None]

    loads, steal, masks = values("load_1m"), values("cpu_steal_pct"), [int(m) for m in values("gpu_throttle")]
    cores = number(cores)
    others = [max(number(s.get("sys_cpu_pct")) - number(s.get("proc_cpu_pct")) / cores, 0.0) for s in samples
              if cores and number(s.get("sys_cpu_pct")) is not None and number(s.get("proc_cpu_pct")) is not None]
    slowed = [m & SLOWDOWN_MASK for m in masks]
    seen = 0
    for m in slowed:
        seen |= m
    return Conditions(
        load_max=max(loads) if loads else None, others_cpu_pct=mean(others) if others else None,
        cpu_steal_pct=mean(steal) if steal else None,
        gpu_throttle=", ".join(slowdown_names(seen)) if masks else None,
        gpu_throttle_share=sum(m != 0 for m in slowed) / len(slowed) if masks else None)
