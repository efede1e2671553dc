"""Measured peaks of one device, run as `python -m stbench.child.peaks DEVICE` (JSON out):
best-of-N fp32 matmul GFLOP/s and copy GB/s (read + write)."""

from __future__ import annotations

import json
import sys
import time

from ..store.machine import cpu_model


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
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else cpu_model()
    return {"device": device, "name": name, "matmul_gflops": 2 * n**3 / mm / 1e9,
            "mem_gbps": 2 * src.element_size() * words / cp / 1e9, "threads": torch.get_num_threads()}



if __name__ == "__main__":
    print(json.dumps(measure_peak(sys.argv[1])))
