"""Measured peaks of one device, run as `python -m stbench.child.peaks DEVICE` (JSON out):
best-of-N matmul GFLOP/s and copy GB/s (read + write)."""

from __future__ import annotations

import json
import sys
import time

from ..device import Accelerator
from ..store.machine import cpu_model

BF16_PRODUCT_S = 0.25  # the most one product of the bf16 peak may take


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
    """Best-of-N matmul GFLOP/s and copy GB/s (read + write) on one device. The matmul runs at
    the precision fp32 matrix products run at in a cell here (`matmul_precision`: strict fp32
    unless torch allows TF32); on CUDA the TF32 figure is kept beside it, since cuDNN's
    convolutions and RNNs use TF32 by default and a cell's `precision` column says which ran."""
    import torch

    accel = Accelerator(device)
    accel.select()
    n, words = accel.peak_sizes.matmul, accel.peak_sizes.copy_words
    a, b = torch.randn(n, n, device=accel.torch), torch.randn(n, n, device=accel.torch)
    mm = _best_seconds(lambda: a @ b, accel.synchronize, 5)
    out = {
        "device": device,
        "name": accel.name(cpu_model()),
        "matmul_gflops": 2 * n**3 / mm / 1e9,
        "matmul_precision": accel.matmul_precision(),
    }
    with accel.tf32_matmul() as tf32:
        if tf32:
            out["tf32_matmul_gflops"] = (
                2 * n**3 / _best_seconds(lambda: a @ b, accel.synchronize, 5) / 1e9
            )
    src = torch.empty(words, device=accel.torch).fill_(1.0)
    dst = torch.empty_like(src)
    cp = _best_seconds(lambda: dst.copy_(src), accel.synchronize, 5)
    return {
        **out,
        "mem_gbps": 2 * src.element_size() * words / cp / 1e9,
        "threads": torch.get_num_threads(),
    }


def fitting_size(n: int, smallest: int, seconds: float) -> int:
    """The bf16 product's size: `n` halved, no lower than `smallest`, until one product takes at
    most BF16_PRODUCT_S at the rate the `smallest` product ran (`seconds`)."""
    while n > smallest and (n / smallest) ** 3 * seconds > BF16_PRODUCT_S:
        n //= 2
    return max(n, smallest)


def measure_bf16(device: str) -> dict:
    """Best-of-N bf16 matmul GFLOP/s (what a `precision=bf16` cell's peak_fraction divides by),
    at a size one product of which takes at most BF16_PRODUCT_S (`fitting_size`): a CPU without
    bf16 units emulates it (0.9 GFLOP/s on a 2-vCPU AMD EPYC without avx512_bf16, where the
    1,024 product took 2.3 s and the peak 17 s)."""
    import torch

    accel = Accelerator(device)
    accel.select()

    def operands(size: int):
        return [torch.randn(size, size, device=accel.torch, dtype=torch.bfloat16) for _ in "ab"]

    smallest = max(accel.peak_sizes.bf16_matmul // 4, 64)
    a, b = operands(smallest)
    n = fitting_size(
        accel.peak_sizes.bf16_matmul, smallest, _best_seconds(lambda: a @ b, accel.synchronize, 1)
    )
    a, b = operands(n)
    return {
        "bf16_matmul_gflops": 2 * n**3 / _best_seconds(lambda: a @ b, accel.synchronize, 5) / 1e9
    }


if __name__ == "__main__":
    measure = measure_bf16 if sys.argv[2:3] == ["bf16"] else measure_peak
    print(json.dumps(measure(sys.argv[1])))
