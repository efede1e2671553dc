"""NVML (nvidia-ml-py) access that degrades to "no GPU" where the library or driver is absent."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def available() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        return True
    except Exception:  # no driver, no libnvidia-ml, or a container without devices
        return False


def devices() -> list[dict]:
    """Name, memory and driver of each GPU NVML sees."""
    if not available():
        return []
    import pynvml

    driver = pynvml.nvmlSystemGetDriverVersion()
    out = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        out.append({"index": i, "name": pynvml.nvmlDeviceGetName(h), "memory_mb": mem.total / 2**20, "driver": driver})
    return out


def sample(index: int) -> dict:
    """Utilisation %, used memory (MiB) and power (W) of one GPU now."""
    import pynvml

    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    util = pynvml.nvmlDeviceGetUtilizationRates(h)
    return {
        "gpu_util_pct": float(util.gpu),
        "gpu_mem_mb": pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20,
        "gpu_power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
    }


def energy_mj(index: int) -> float | None:
    """The GPU's cumulative energy counter in mJ (Volta and newer), or None."""
    if not available():
        return None
    import pynvml

    try:
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(index)))
    except pynvml.NVMLError:
        return None
