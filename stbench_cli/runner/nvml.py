"""NVML (nvidia-ml-py): the GPUs' inventory, sampled fields and energy counters.

NVML numbers devices by PCI bus and ignores CUDA_VISIBLE_DEVICES, while a cell's `cuda:N` is
CUDA's numbering, so devices are matched by UUID (see `runner.envinfo`). Each field is read on
its own: a field a device does not support (MIG mode, some containers) reads as None and is
remembered as unavailable; sampling never stops because of one field.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from functools import lru_cache


@lru_cache(maxsize=1)
def available() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        return True
    except Exception:  # no driver, no libnvidia-ml, or a container without devices
        return False


def _guard(read: Callable, handle):
    try:
        return read(handle)
    except Exception:  # NVMLError_NotSupported, _NoPermission, a lost GPU: the field is unavailable
        return None


def devices() -> list[dict]:
    """Name, memory, driver and UUID of each GPU NVML sees, in NVML's (PCI bus) order."""
    if not available():
        return []
    import pynvml

    driver = _guard(lambda _: pynvml.nvmlSystemGetDriverVersion(), None)
    out = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        mem = _guard(pynvml.nvmlDeviceGetMemoryInfo, h)
        out.append(
            {
                "nvml_index": i,
                "name": _guard(pynvml.nvmlDeviceGetName, h),
                "uuid": _guard(pynvml.nvmlDeviceGetUUID, h),
                "memory_mb": mem.total / 2**20 if mem else None,
                "driver": driver,
            }
        )
    return out


def handles(uuids: list[str]) -> list:
    """NVML handles of the GPUs with these UUIDs (the ones NVML can find)."""
    if not available():
        return []
    import pynvml

    return [
        h
        for h in (_guard(lambda u: pynvml.nvmlDeviceGetHandleByUUID(u), u) for u in uuids)
        if h is not None
    ]


def _readers() -> dict[str, Callable]:
    import pynvml

    return {
        "gpu_util_pct": lambda h: float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
        "gpu_mem_mb": lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20,
        "gpu_power_w": lambda h: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "gpu_energy_mj": lambda h: float(pynvml.nvmlDeviceGetTotalEnergyConsumption(h)),
        "gpu_throttle": _clock_reasons,
    }


def _clock_reasons(handle) -> int:
    """Why the GPU's clocks are below their maximum now: a bit mask (store.conditions names the
    bits). Newer NVML calls them the clocks' event reasons, older its throttle reasons."""
    import pynvml

    read = (
        getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return int(read(handle))


class GpuReader:
    """The sampled fields of a cell's GPUs, each read on its own.

    sample(): utilisation averaged, memory and power summed, slowdown reasons OR'ed over the
    GPUs; a field any GPU cannot give is None, and named in `unavailable`. readers: field ->
    (handle -> value); the default reads NVML; a field without a reader is not sampled.
    """

    SAMPLED = ("gpu_util_pct", "gpu_mem_mb", "gpu_power_w", "gpu_throttle")

    def __init__(self, handles: list, readers: dict[str, Callable] | None = None):
        self.handles = handles
        self.readers = readers if readers is not None else _readers()
        self.unavailable: set[str] = set()

    def read(self, field: str) -> list:
        values = [_guard(self.readers[field], h) for h in self.handles]
        if None in values:
            self.unavailable.add(field)
        return values

    def sample(self) -> dict:
        out = {}
        for field in (f for f in self.SAMPLED if f in self.readers):
            values = self.read(field)
            if None in values:
                out[field] = None
            elif field == "gpu_throttle":
                out[field] = functools.reduce(operator.or_, values, 0)
            else:
                out[field] = sum(values) / len(values) if field == "gpu_util_pct" else sum(values)
        return out

    def energy_mj(self) -> float | None:
        """The GPUs' cumulative energy counters summed (Volta and newer), or None."""
        values = self.read("gpu_energy_mj")
        return None if None in values else sum(values)
