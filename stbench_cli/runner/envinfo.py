"""Hardware and software inventory, and a short measured peak per device (cached).

The peaks (fp32 matmul FLOP/s and copy bandwidth) are measured in a child process
(`stbench.child.peaks`) so that the parent never creates a CUDA context: one would hold GPU
memory for the whole matrix and distort the cells' memory figures. The parent imports torch
only to read its version and count devices, which creates no context.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from ..contract.workload import default_cache_dir
from ..store.machine import EnvInfo, cpu_model
from . import nvml


def dist_backends() -> tuple[str, ...]:
    import torch.distributed as dist

    if not dist.is_available():
        return ()
    have = {"gloo": dist.is_gloo_available(), "nccl": dist.is_nccl_available(), "mpi": dist.is_mpi_available()}
    return tuple(name for name, ok in have.items() if ok)


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
        cpu_model=cpu_model(), cores_physical=psutil.cpu_count(logical=False) or 0,
        cores_logical=psutil.cpu_count() or 0, threads=torch.get_num_threads(),
        ram_gb=round(psutil.virtual_memory().total / 2**30, 1), torch=torch.__version__,
        cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version() if gpu_count else None,
        nccl=nccl, gpu_count=gpu_count, gpus=gpus(gpu_count), dist_backends=dist_backends(),
    )


def match_gpus(cuda: list[dict], nvml_devices: list[dict]) -> tuple[dict, ...]:
    """CUDA's devices (index = the N of `cuda:N`) with NVML's record of the same GPU, matched by
    UUID: NVML orders by PCI bus and ignores CUDA_VISIBLE_DEVICES. GPUs NVML sees but this
    torch cannot use are listed with index None."""
    by_uuid = {str(d.get("uuid") or "").lower().removeprefix("gpu-"): d for d in nvml_devices}
    out, used = [], set()
    for c in cuda:
        key = c["uuid"].lower().removeprefix("gpu-")
        n = by_uuid.get(key, {})
        used.add(key)
        out.append({**n, "index": c["index"], "name": c["name"], "memory_mb": c["memory_mb"],
                    "uuid": n.get("uuid") or f"GPU-{c['uuid']}"})
    out += [{**d, "index": None} for k, d in by_uuid.items() if k not in used]
    return tuple(out)


def gpus(gpu_count: int) -> tuple[dict, ...]:
    cuda = []
    if gpu_count:
        proc = subprocess.run([sys.executable, "-m", "stbench.child.devices"], capture_output=True, text=True)
        cuda = json.loads(proc.stdout) if proc.returncode == 0 else []
    return match_gpus(cuda, nvml.devices())


def cache_dir() -> Path:
    return default_cache_dir()


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
            proc = subprocess.run([sys.executable, "-m", "stbench.child.peaks", device],
                                  capture_output=True, text=True, check=True)
            cache[key] = json.loads(proc.stdout)
        out[device] = cache[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1))
    os.replace(tmp, path)
    return out
