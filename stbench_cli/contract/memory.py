"""What a workload's memory prediction must add on CUDA besides its own tensors: the libraries'
allocations that go through torch's caching allocator, and so count in the peak the cell
measures (`max_memory_allocated`). Pure: the capability comes from the device layer
(`Accelerator.capability()`), in the cell; the parent, before a cell runs, passes none."""

from __future__ import annotations

import os
import re

_HOPPER = 4096 * 1024 * 8  # ":4096:8"
_BEFORE_HOPPER = 4096 * 1024 * 2 + 16 * 1024 * 8  # ":4096:2:16:8", 8 MiB + 128 KiB
# Forward runs on the thread that calls the model, backward on autograd's own thread for the
# device; cuBLAS handles are reserved per thread, and torch keeps one workspace per (handle,
# stream) it ran a product on: a training process holds two.
TRAINING_CUBLAS_WORKSPACES = 2


def cublas_workspace_bytes(capability: tuple[int, int] | None, config: str | None = None) -> int:
    """One cuBLAS workspace as torch sizes it (aten/src/ATen/cuda/CublasHandlePool.cpp,
    parseChosenWorkspaceSize). CUBLAS_WORKSPACE_CONFIG (`config`; None: this environment's)
    decides when set: each :SIZE:COUNT adds SIZE KiB x COUNT, and text with none of them is
    ignored, as torch ignores it. Otherwise the default of the GPU's capability: 32 MiB from
    Hopper on (9.x; recent torch also gives Blackwell's 10.x-12.x 32 MiB, older torch 8.125 MiB),
    8.125 MiB before. An unknown GPU (None) gets the larger, so a prediction errs high."""
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG") if config is None else config
    items = re.findall(r":([0-9]+):([0-9]+)", config or "")
    if items:
        return sum(int(size) * 1024 * int(count) for size, count in items)
    return _HOPPER if capability is None or capability[0] >= 9 else _BEFORE_HOPPER


def cuda_library_bytes(capability: tuple[int, int] | None, config: str | None = None) -> int:
    """A training process's library allocations on CUDA: its cuBLAS workspaces (cuBLASLt's,
    1 MiB each by default and only where it runs, are left out)."""
    return TRAINING_CUBLAS_WORKSPACES * cublas_workspace_bytes(capability, config)
