"""The inventory of a machine, as recorded in a study's manifest (torch-free)."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class EnvInfo:
    host: str
    os: str
    python: str
    cpu_model: str
    cores_physical: int
    cores_logical: int
    threads: int  # torch intra-op threads a single-process cell gets by default
    ram_gb: float
    torch: str
    cuda: str | None
    cudnn: int | None
    nccl: str | None
    gpu_count: int
    gpus: tuple[dict, ...]
    dist_backends: tuple[str, ...] = ()  # torch.distributed backends this torch build has (empty: unknown)

    def to_dict(self) -> dict:
        return asdict(self)

    def gpu_memory_bytes(self, device: str) -> float | None:
        """Total memory of the GPU a device string names, from the inventory (None if unknown)."""
        if not device.startswith("cuda") or not self.gpus:
            return None
        index = int(device.split(":")[1]) if ":" in device else 0
        mb = self.gpus[min(index, len(self.gpus) - 1)].get("memory_mb")
        return mb * 2**20 if mb else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
