"""Hardware and software inventory, and a short measured peak per device (cached).

The peaks (fp32 matmul FLOP/s and copy bandwidth) are measured in a child process so
that the parent never creates a CUDA context: one would hold GPU memory for the whole
matrix and distort the cells' memory figures.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from . import nvml


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


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect() -> EnvInfo:
    import torch

    gpu_count = torch.cuda.device_count()  # respects CUDA_VISIBLE_DEVICES; creates no context
    nccl = None
    if gpu_count:
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # NCCL missing from this build
            nccl = None
    return EnvInfo(
        host=socket.gethostname(), os=platform.platform(), python=platform.python_version(),
        cpu_model=_cpu_model(), cores_physical=psutil.cpu_count(logical=False) or 0,
        cores_logical=psutil.cpu_count() or 0, threads=torch.get_num_threads(),
        ram_gb=round(psutil.virtual_memory().total / 2**30, 1), torch=torch.__version__,
        cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version() if gpu_count else None,
        nccl=nccl, gpu_count=gpu_count, gpus=tuple(nvml.devices()),
    )


def _best_seconds(fn, sync, reps: int) -> float:
    fn()
    sync()  # warm-up: allocation and kernel selection
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def measure_peak(device: str) -> dict:
    """Best-of-N fp32 matmul GFLOP/s and copy GB/s (read + write) on one device."""
    import torch

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    n = 8192 if dev.type == "cuda" else 2048
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    mm = _best_seconds(lambda: a @ b, sync, 5)
    words = (256 if dev.type == "cuda" else 32) * 2**20  # 1 GiB on GPU, 128 MiB on CPU
    src = torch.empty(words, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    cp = _best_seconds(lambda: dst.copy_(src), sync, 5)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else _cpu_model()
    return {"device": device, "name": name, "matmul_gflops": 2 * n**3 / mm / 1e9,
            "mem_gbps": 2 * src.element_size() * words / cp / 1e9, "threads": torch.get_num_threads()}


def cache_dir() -> Path:
    return Path(os.environ.get("STBENCH_CACHE", Path.home() / ".cache" / "stbench"))


def peaks(env: EnvInfo, devices: list[str], refresh: bool = False) -> dict[str, dict]:
    """Measured peak per device, from the cache when this host/build/threads was measured."""
    path = cache_dir() / "peaks.json"
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    out = {}
    for device in devices:
        key = f"{env.host}|{device}|torch {env.torch}|threads {env.threads}"
        if refresh or key not in cache:
            proc = subprocess.run([sys.executable, "-m", "stbench_cli.envinfo", device],
                                  capture_output=True, text=True, check=True)
            cache[key] = json.loads(proc.stdout)
        out[device] = cache[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1))
    os.replace(tmp, path)
    return out


if __name__ == "__main__":
    print(json.dumps(measure_peak(sys.argv[1])))
