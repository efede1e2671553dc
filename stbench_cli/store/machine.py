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

    def to_dict(self) -> dict:
        return asdict(self)

    def gpu_memory_bytes(self, device: str) -> float | None:
        """Total memory of the GPU a device string names, from the inventory (None if unknown)."""
        gpu = self.gpu(device)
        return gpu["memory_mb"] * 2**20 if gpu and gpu.get("memory_mb") else None

    def gpu(self, device: str) -> dict | None:
        """The inventory record of the GPU `cuda` or `cuda:N` names (CUDA's numbering)."""
        if not device.startswith("cuda"):
            return None
        index = int(device.split(":")[1]) if ":" in device else 0
        return next((g for g in self.gpus if g.get("index") == index), None)

    def gpu_uuids(self, indices: list[int]) -> list[str]:
        """UUIDs of the GPUs with these CUDA indices (what NVML finds them by)."""
        return [g["uuid"] for g in self.gpus if g.get("index") in indices and g.get("uuid")]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
