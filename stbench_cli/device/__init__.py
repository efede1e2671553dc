"""The one device layer: what a device string means, and every device-specific call.

Two halves, one package:

- names.py: `Device` and `parse()` are pure (no torch): the planner, launchers, report and store
  ask `parse(text).is_cuda` instead of comparing strings; an unknown device is one clear error.
- accelerator.py: `Accelerator` is the torch side, made once per process for the device that
  process really uses (`cuda` resolved to `cuda:N`): selecting, synchronising, events, side
  streams, memory statistics, pinned staging, the device's name and properties, the profiler's
  activities. Everything else calls it and never `torch.cuda`, so CPU and CUDA differ only here.
- clock.py: `Clock`, a training step's timing marks on the device's own clock.
- `Device.backend`: the distributed backend where none is chosen (NCCL between GPUs).

Every layer imports the device layer from here (`from ..device import parse`), never a module
inside it.

torch's device-generic API (`torch.accelerator`, `torch.Event`, `torch.Stream`) is used where it
covers the call; what stays CUDA-specific, and why, is in docs/decisions/device-layer.md.
"""

from .accelerator import (
    Accelerator,
    cuda_devices,
    cuda_initialized,
    cudnn_version,
    device_count,
    nccl_version,
)
from .clock import Clock
from .names import KINDS, VALID, Device, is_cuda, match_gpus, parse, resolve_device, visible_devices

__all__ = [
    "KINDS",
    "VALID",
    "Accelerator",
    "Clock",
    "Device",
    "cuda_devices",
    "cuda_initialized",
    "cudnn_version",
    "device_count",
    "is_cuda",
    "match_gpus",
    "nccl_version",
    "parse",
    "resolve_device",
    "visible_devices",
]
