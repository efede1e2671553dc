"""The inventory of a machine, as recorded in a study's manifest (torch-free)."""

from __future__ import annotations

import hashlib
import math
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

from ..device import is_cuda, parse


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
    dist_backends: tuple[
        str, ...
    ] = ()  # torch.distributed backends this torch build has (empty: unknown)

    def to_dict(self) -> dict:
        return asdict(self)

    def gpu_memory_bytes(self, device: str) -> float | None:
        """Total memory of the GPU a device string names, from the inventory (None if unknown)."""
        gpu = self.gpu(device)
        return gpu["memory_mb"] * 2**20 if gpu and gpu.get("memory_mb") else None

    def gpu(self, device: str) -> dict | None:
        """The inventory record of the GPU `cuda` or `cuda:N` names (CUDA's numbering)."""
        if not is_cuda(device):
            return None
        index = parse(device).index or 0
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


def gpu_names(gpus) -> str | None:
    """The GPUs of an inventory as one text, each name once with its count: "2x Tesla T4"."""
    names = [g.get("name", "") for g in gpus or ()]
    if not names:
        return None
    counts = {n: names.count(n) for n in dict.fromkeys(names)}
    return "; ".join(n if c == 1 else f"{c}x {n}" for n, c in counts.items())


def fingerprint(host, cpu_model, cores, gpus, gpu_count, torch) -> str:
    """A short stable id of a machine: host, CPU model, core count, GPUs and the torch build.

    Two rows with the same fingerprint ran on the same machine; a generic host name alone
    (`vm`, `localhost`) says nothing. Missing fields count as empty."""
    parts = [host, cpu_model, cores, gpus, gpu_count, torch]
    blob = "|".join("" if _absent(p) else str(int(p) if isinstance(p, float) else p) for p in parts)
    return hashlib.sha1(blob.encode()).hexdigest()[:10]


def _absent(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))
