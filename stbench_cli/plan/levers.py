"""The levers `stbench tune` searches for a fair CPU baseline, in the order it
searches them, with the values each tries on this machine. Pure: what the machine offers comes
in as a `HostOffer` (runner.tune reads it from store.host).

The order (coordinate descent: one lever at a time from torch's defaults, each later lever
measured with the earlier ones' best):

1. threads, inter-op threads, binding: how many cores every later cell computes on, and where;
   on a shared machine the lever that matters most, and every other one is measured under it.
2. precision, then compile: the math; inductor's code depends on the dtype it compiles.
3. allocator: memory reuse, whose cost depends on the tensors' sizes bf16 may have halved.
4. DataLoader workers: the faster the step, the more a loader's wait shows.
5. batch size: last, because it changes what is learned: judged by time to target where every
   cell reaches the target, else by the validation metric after the same training seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

BATCH = "batch_size"  # the engine axis; every other lever is a `--set` parameter


@dataclass(frozen=True)
class HostOffer:
    """What this machine offers the levers."""

    physical: int  # physical cores within the process's affinity
    logical: int  # logical CPUs
    torch_threads: int  # intra-op threads a fresh torch process takes by itself
    allocators: tuple[str, ...] = ()  # preloadable allocator libraries installed (jemalloc...)
    binding: Mapping[str, str | None] = field(default_factory=dict)  # bind mode -> why not
    numa_nodes: int = 1


@dataclass(frozen=True)
class Lever:
    name: str  # a TrainerParams knob, or BATCH
    default: Callable[[HostOffer, int], object]  # torch's default (host, the workload's batch)
    values: Callable[[HostOffer, int], tuple]  # the values tried besides the reference
    missing: Callable[[HostOffer], tuple[str, ...]] = lambda host: ()  # values not here, and why
    quality_judged: bool = False  # judged by time to target / quality, not throughput


def _threads(host: HostOffer, batch: int) -> tuple:
    return tuple(dict.fromkeys([host.physical, host.logical, max(host.physical // 2, 1), 1]))


def _bind(host: HostOffer, batch: int) -> tuple:
    return tuple(m for m in ("cores", "numa") if not host.binding.get(m) and _numa_useful(m, host))


def _numa_useful(mode: str, host: HostOffer) -> bool:
    return mode != "numa" or host.numa_nodes > 1


def _bind_missing(host: HostOffer) -> tuple[str, ...]:
    out = [f"bind={m}: {why}" for m, why in host.binding.items() if why]
    if not host.binding.get("numa") and host.numa_nodes <= 1:
        out.append("bind=numa: one NUMA node here, nothing to bind memory to")
    return tuple(out)


def _allocator_missing(host: HostOffer) -> tuple[str, ...]:
    return tuple(
        f"allocator={a}: not installed (e.g. apt install "
        f"{'libjemalloc2' if a == 'jemalloc' else 'libtcmalloc-minimal4'})"
        for a in ("jemalloc", "tcmalloc")
        if a not in host.allocators
    )


LEVERS: tuple[Lever, ...] = (
    Lever("threads", lambda h, b: h.torch_threads, _threads),
    Lever("interop_threads", lambda h, b: 0, lambda h, b: tuple(dict.fromkeys([1, h.physical]))),
    Lever("bind", lambda h, b: "none", _bind, _bind_missing),
    Lever("precision", lambda h, b: "default", lambda h, b: ("bf16",)),
    Lever("compile", lambda h, b: "none", lambda h, b: ("default",)),
    # glibc as a plain script has it; keep: stbench's fixed thresholds (child/allocator.py)
    Lever(
        "allocator", lambda h, b: "system", lambda h, b: ("keep", *h.allocators), _allocator_missing
    ),
    Lever("workers", lambda h, b: 0, lambda h, b: tuple(dict.fromkeys([1, min(2, h.physical)]))),
    Lever(
        BATCH,
        lambda h, b: b,
        lambda h, b: tuple(v for v in (b // 2, b * 2) if v >= 1),
        quality_judged=True,
    ),
)
NAMES = tuple(lever.name for lever in LEVERS)


def get(name: str) -> Lever:
    return next(lever for lever in LEVERS if lever.name == name)


def baseline(host: HostOffer, batch: int) -> dict[str, object]:
    """torch's defaults for every lever: what a plain PyTorch script runs with."""
    return {lever.name: lever.default(host, batch) for lever in LEVERS}


def tried(lever: Lever, host: HostOffer, batch: int, reference: object) -> tuple:
    """The values a step tries: the reference (the best so far) first, then the others."""
    return tuple(dict.fromkeys([reference, *lever.values(host, batch)]))
