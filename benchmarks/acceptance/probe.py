"""The one CUDA measurement a check makes itself, in a child process so that the acceptance's
own process never holds a CUDA context beside the cells it runs (h2d-plausible):

    python -m benchmarks.acceptance.probe NBYTES     -> the fastest pinned copy of NBYTES, seconds
"""

from __future__ import annotations

import math
import sys

import torch

from stbench.device import Accelerator


def pinned_copy_s(nbytes: int, repeats: int = 20) -> float:
    """The fastest of `repeats` pinned host-to-device copies of nbytes, on the device's clock."""
    accel = Accelerator("cuda")
    accel.select()
    host = torch.empty(max(nbytes, 1), dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(host, device=accel.torch)
    best = math.inf
    for _ in range(repeats):
        start, end = accel.event(), accel.event()
        start.record()
        dev.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, accel.elapsed_s(start, end))
    return best


if __name__ == "__main__":
    print(f"{pinned_copy_s(int(sys.argv[1])):.9f}")
