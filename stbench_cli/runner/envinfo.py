"""Hardware and software inventory, and a short measured peak per device (cached).

The peaks (fp32 matmul FLOP/s and copy bandwidth) are measured in a child process
(`stbench.child.peaks`) so that the parent never creates a CUDA context: one would hold GPU
memory for the whole matrix and distort the cells' memory figures. The parent imports torch
only to read its version and count devices, which creates no context.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import socket
import sys
from pathlib import Path

import psutil

from ..contract.workload import default_cache_dir
from ..device import cudnn_version, device_count, match_gpus, nccl_version
from ..store.machine import EnvInfo, cpu_model
from . import nvml, warm


def dist_backends() -> tuple[str, ...]:
    import torch.distributed as dist

    if not dist.is_available():
        return ()
    have = {
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "mpi": dist.is_mpi_available(),
    }
    return tuple(name for name, ok in have.items() if ok)


def collect() -> EnvInfo:
    import torch

    gpu_count = device_count()  # respects CUDA_VISIBLE_DEVICES; creates no context
    nccl = nccl_version() if gpu_count else None
    return EnvInfo(
        host=socket.gethostname(),
        os=platform.platform(),
        python=platform.python_version(),
        cpu_model=cpu_model(),
        cores_physical=psutil.cpu_count(logical=False) or 0,
        cores_logical=psutil.cpu_count() or 0,
        threads=torch.get_num_threads(),
        ram_gb=round(psutil.virtual_memory().total / 2**30, 1),
        torch=str(torch.__version__),  # a TorchVersion would need torch to be unpickled
        cuda=torch.version.cuda,
        cudnn=cudnn_version() if gpu_count else None,
        nccl=nccl,
        gpu_count=gpu_count,
        gpus=gpus(gpu_count),
        dist_backends=dist_backends(),
    )


# What the inventory reads that a process's environment can change between commands run in one
# process (the GPU acceptance runs many): an inventory is taken again when one of them differs.
INVENTORY_ENV = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "STBENCH_FAKE_CUDA")


def inventory() -> EnvInfo:
    """This machine's inventory for a study: taken in a process forked from the warm server
    (runner/warm.py, which has imported torch), so that the parent imports no torch for it; one
    answer a process and environment. With warm cells off, taken here, each time."""
    from . import warm

    if not warm.enabled():
        return collect()
    return _inventory(tuple(os.environ.get(k) for k in INVENTORY_ENV))


@functools.cache
def _inventory(_environment: tuple) -> EnvInfo:
    from . import warm

    return warm.call(collect)


# The GPUs do not change within a process, and asking costs a child that initialises CUDA: one
# answer a process (the GPU acceptance runs many commands in one).
@functools.cache
def gpus(gpu_count: int) -> tuple[dict, ...]:
    cuda = []
    if gpu_count:
        proc = warm.run_module([sys.executable, "-m", "stbench.child.devices"])
        cuda = json.loads(proc.stdout) if proc.returncode == 0 else []
    return match_gpus(cuda, nvml.devices())


def cache_dir() -> Path:
    return default_cache_dir()


def peaks(
    env: EnvInfo, devices: list[str], refresh: bool = False, bf16: tuple[str, ...] = ()
) -> dict[str, dict]:
    """Measured peak per device, from the cache when this host/build/threads was measured; the
    devices in `bf16` also get their bf16 matmul peak. A peak that cannot be measured is
    `{"unavailable": reason}` (not cached): the study goes on without a peak fraction there."""
    path = cache_dir() / "peaks.json"
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    out = {}
    for device in devices:
        key = f"{env.host}|{device}|torch {env.torch}|threads {env.threads}"
        # (cache key, argv) of each peak to measure
        wanted = [(key, ())] + ([(key + "|bf16", ("bf16",))] if device in bf16 else [])
        for k, extra in wanted:
            if refresh or k not in cache:
                measured = _measure(device, *extra)
                if "unavailable" in measured:
                    out[device] = measured
                    break
                cache[k] = measured
            out[device] = {**out.get(device, {}), **cache[k]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        os.replace(tmp, path)
    except OSError:  # a cache that cannot be written costs a measurement next time, nothing more
        pass
    return out


def _measure(device: str, *extra: str) -> dict:
    proc = warm.run_module([sys.executable, "-m", "stbench.child.peaks", device, *extra])
    try:
        if proc.returncode == 0:
            return json.loads(proc.stdout)
    except ValueError:
        pass
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    return {
        "device": device,
        "unavailable": f"peak measurement failed: {lines[-1] if lines else proc.returncode}",
    }
